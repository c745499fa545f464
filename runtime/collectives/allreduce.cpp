// All-reduce.
// ring: reduce-scatter then all-gather around all n members: 2(n-1) steps, each member sends
//   2(n-1)/n of the vector (the reduce-scatter half as f32 partial sums).
// hier: L members per node, K nodes. (1) each local member reduces 1/L of the vector from
//   its node's inputs, read in place through shared memory; (2) an all-reduce
//   of that part among the K members with the same local place: a ring (2(K-1) steps,
//   2(K-1)/K of the part sent by each), or for a small part a one-shot (1 step, (K-1)x the
//   part sent by each); (3) each member copies the other L-1 parts from its node's peers.
//   Network bytes per node: 2(K-1)/K of the vector split over L parallel rings, or (K-1)x it
//   in one step when small.
#include "common/streaming_copy.h"
#include "common/trace.h"
#include "runtime/barrier.h"
#include "runtime/collectives.h"
#include "runtime/collectives/contribution.h"
#include "runtime/collectives/hierarchy.h"
#include "runtime/collectives/one_shot.h"
#include "runtime/collectives/ring.h"

namespace symmesh {
namespace {

// Scales element ranges to byte ranges.
std::vector<Range> in_bytes(std::vector<Range> ranges, size_t element, size_t base = 0) {
  for (Range& range : ranges) range = Range{(base + range.begin) * element, range.count * element};
  return ranges;
}

// Reduces `own` (this member's contribution to `count` elements) over `team` and writes the
// result, in `dtype`, to dst[0, count); acc is f32 room for `count` values (dst itself for f32).
void ring_allreduce_f32(Pe& pe, Team& team, std::byte* dst, const Contribution& own, float* acc,
                        size_t count, DType dtype) {
  const uint64_t sequence = team.next_collective();
  const int n = team.size();
  const size_t element = dtype_size(dtype);
  announce_entered(pe, team, sequence, {(team.my_index() + n - 1) % n});
  const auto blocks = block_ranges(count, n);
  ring_reduce_scatter_f32(pe, team, own, acc, blocks);
  const Range mine = blocks[team.my_index()];
  if (reinterpret_cast<std::byte*>(acc) != dst) {
    store_from_f32(dst + mine.begin * element, acc + mine.begin, mine.count, dtype);
  }
  ring_allgather_bytes(pe, team, dst, in_bytes(blocks, element), sequence);
}

void ring_allreduce(Pe& pe, Team& team, std::byte* dst, const void* src, size_t count, DType dtype,
                    ReduceOp op) {
  // f32 reduces in place in dst (each block is done with before its final value arrives).
  float* acc = dtype == DType::kF32 ? reinterpret_cast<float*>(dst) : staging_f32(count);
  const Contribution own({static_cast<const std::byte*>(src)}, dtype, op);
  ring_allreduce_f32(pe, team, dst, own, acc, count, dtype);
}

void hier_allreduce(Pe& pe, Team& team, std::byte* dst, const void* src, size_t count, DType dtype,
                    ReduceOp op) {
  const Hierarchy h = hierarchy_of(pe, team);
  const size_t element = dtype_size(dtype);
  const auto parts = block_ranges(count, h.locals);
  const Range part = parts[h.local];
  // The members of a cross team share a local place, hence a part size, hence this choice.
  const bool one_shot = one_shot_suits(part.count, h.nodes);
  const uint64_t sequence = one_shot ? one_shot_enter(pe, h.cross) : 0;
  barrier(pe, h.node);  // every local input is ready and every local dst is free
  float* acc =
      dtype == DType::kF32 ? reinterpret_cast<float*>(dst) + part.begin : staging_f32(part.count);
  // The node's inputs of this part, read in place until the barrier after the cross step.
  std::vector<const std::byte*> inputs;
  for (int m = 0; m < h.locals; ++m) {
    inputs.push_back(static_cast<const std::byte*>(pe.ptr(src, h.node.pe(m))) +
                     part.begin * element);
  }
  const Contribution own(std::move(inputs), dtype, op);
  if (one_shot) {
    own.load(Range{0, part.count}, acc);
    one_shot_allreduce_f32(pe, h.cross, sequence, dst + part.begin * element, acc, part.count,
                           dtype, op);
  } else {
    ring_allreduce_f32(pe, h.cross, dst + part.begin * element, own, acc, part.count, dtype);
  }
  barrier(pe, h.node);  // every part is final in its owner's dst
  {
    // The peers' parts together: streamed past the cache share (see common/streaming_copy.h).
    const ScopedCopyInto copy((count - part.count) * element);
    for (int m = 0; m < h.locals; ++m) {
      if (m == h.local) continue;
      const auto* peer = static_cast<const std::byte*>(pe.ptr(dst, h.node.pe(m)));
      copy(dst + parts[m].begin * element, peer + parts[m].begin * element,
           parts[m].count * element);
    }
  }
  barrier(pe, h.node);  // nobody returns while a peer still reads its dst
}

}  // namespace

void allreduce(Pe& pe, Team& team, void* dst, const void* src, size_t count, DType dtype,
               ReduceOp op, CollAlgo algo) {
  const trace::Scope span("allreduce", "collective");
  check_member(pe, team, "allreduce");
  auto* out = static_cast<std::byte*>(dst);
  switch (algo) {
    case CollAlgo::kRing:
      return ring_allreduce(pe, team, out, src, count, dtype, op);
    case CollAlgo::kHier:
      return hier_allreduce(pe, team, out, src, count, dtype, op);
  }
  throw InvalidArgument("allreduce algorithm " + std::to_string(int(algo)) +
                        " is not one of: ring, hier");
}

}  // namespace symmesh
