// Reduce-scatter: member i ends with block i of the reduction.
// ring: n-1 steps, each member sends (n-1)/n of the vector as f32 partial sums.
// hier: local member l reduce-scatters the blocks of every node's l-th member around the ring
//   of the members with local place l, so each ends with its own block; the ring reads its
//   node's inputs in place (contribution.h) as it sends and receives, with no pass over them
//   before the wire starts. Network bytes per node: (K-1)/K of the vector over L parallel
//   rings.
#include "common/errors.h"
#include "common/trace.h"
#include "runtime/barrier.h"
#include "runtime/collectives.h"
#include "runtime/collectives/contribution.h"
#include "runtime/collectives/hierarchy.h"
#include "runtime/collectives/ring.h"

namespace symmesh {
namespace {

// The ring reduce-scatter of `own` over `team`, block `blocks[team.my_index()]` of the `count`
// elements into dst: f32 sums are written there as they are made, other types are summed in f32
// and rounded once.
void ring_into(Pe& pe, Team& team, const Contribution& own, size_t count,
               const std::vector<Range>& blocks, std::byte* dst, DType dtype) {
  float* acc = staging_f32(count);
  const bool f32 = dtype == DType::kF32;
  ring_reduce_scatter_f32(pe, team, own, acc, blocks,
                          f32 ? reinterpret_cast<float*>(dst) : nullptr);
  const Range mine = blocks[team.my_index()];
  if (!f32) store_from_f32(dst, acc + mine.begin, mine.count, dtype);
}

void ring_reduce_scatter(Pe& pe, Team& team, std::byte* dst, const void* src, size_t count,
                         DType dtype, ReduceOp op) {
  const Contribution own({static_cast<const std::byte*>(src)}, dtype, op);
  ring_into(pe, team, own, count, block_ranges(count, team.size()), dst, dtype);
}

void hier_reduce_scatter(Pe& pe, Team& team, std::byte* dst, const void* src, size_t count,
                         DType dtype, ReduceOp op) {
  const Hierarchy h = hierarchy_of(pe, team);
  const auto team_blocks = block_ranges(count, team.size());
  // The blocks this member reduces: node k's member with my local place, at their places in
  // the vector (the ring's scratch in acc is touched at those places only).
  std::vector<Range> mine_per_node;
  for (int k = 0; k < h.nodes; ++k) mine_per_node.push_back(team_blocks[k * h.locals + h.local]);
  barrier(pe, h.node);  // every local input is ready
  // The node's inputs, read in place by the ring when it needs their values.
  std::vector<const std::byte*> inputs;
  for (int m = 0; m < h.locals; ++m) {
    inputs.push_back(static_cast<const std::byte*>(pe.ptr(src, h.node.pe(m))));
  }
  ring_into(pe, h.cross, Contribution(std::move(inputs), dtype, op), count, mine_per_node, dst,
            dtype);
  barrier(pe, h.node);  // local peers are done reading this member's input
}

// The sums are written while members still read the inputs, so dst must lie apart from src.
// Judged with the largest block, so every member gives the same answer and none is left in the
// ring waiting for one that refused.
void refuse_overlap(const std::byte* dst, const void* src, size_t count, DType dtype, int members) {
  const auto* in = static_cast<const std::byte*>(src);
  const size_t element = dtype_size(dtype);
  const size_t in_bytes = count * element;
  const size_t out_bytes = (count + size_t(members) - 1) / size_t(members) * element;
  if (dst < in + in_bytes && in < dst + out_bytes) {
    throw InvalidArgument("reduce_scatter: the output (" + std::to_string(out_bytes) +
                          " bytes) overlaps the input (" + std::to_string(in_bytes) +
                          " bytes); a reduce-scatter does not run in place, so give it an "
                          "output apart from its input");
  }
}

}  // namespace

void reduce_scatter(Pe& pe, Team& team, void* dst, const void* src, size_t count, DType dtype,
                    ReduceOp op, CollAlgo algo) {
  const trace::Scope span("reduce-scatter", "collective");
  check_member(pe, team, "reduce_scatter");
  auto* out = static_cast<std::byte*>(dst);
  refuse_overlap(out, src, count, dtype, team.size());
  switch (algo) {
    case CollAlgo::kRing:
      return ring_reduce_scatter(pe, team, out, src, count, dtype, op);
    case CollAlgo::kHier:
      return hier_reduce_scatter(pe, team, out, src, count, dtype, op);
  }
  throw InvalidArgument("reduce_scatter algorithm " + std::to_string(int(algo)) +
                        " is not one of: ring, hier");
}

}  // namespace symmesh
