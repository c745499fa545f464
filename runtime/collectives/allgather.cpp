// All-gather: member i's `count` elements land at dst[i*count] on every member.
// ring: n-1 steps writing whole blocks into the next member's dst; each member sends
//   (n-1)/n of the result.
// hier: (1) each member copies its node's inputs (read in place) into its dst; (2) the
//   members with local place l all-gather part l of every node's block around their ring;
//   (3) each member copies the other parts of the other nodes' blocks from its node's peers.
//   Network bytes per node: (K-1)/K of the result over L parallel rings.
#include <cstring>

#include "common/streaming_copy.h"
#include "common/trace.h"
#include "runtime/barrier.h"
#include "runtime/collectives.h"
#include "runtime/collectives/hierarchy.h"
#include "runtime/collectives/ring.h"

namespace symmesh {
namespace {

void ring_allgather(Pe& pe, Team& team, std::byte* dst, const void* src, size_t bytes) {
  const uint64_t sequence = team.next_collective();
  const int n = team.size();
  announce_entered(pe, team, sequence, {(team.my_index() + n - 1) % n});
  std::memcpy(dst + team.my_index() * bytes, src, bytes);
  std::vector<Range> blocks;
  for (int i = 0; i < n; ++i) blocks.push_back(Range{i * bytes, bytes});
  ring_allgather_bytes(pe, team, dst, blocks, sequence);
}

void hier_allgather(Pe& pe, Team& team, std::byte* dst, const void* src, size_t bytes) {
  const Hierarchy h = hierarchy_of(pe, team);
  const size_t node_bytes = bytes * h.locals;
  const auto parts = block_ranges(node_bytes, h.locals);
  barrier(pe, h.node);
  {
    // Each of the two copying steps streams past the cache share when its copies add up to it
    // (common/streaming_copy.h), fenced before anyone reads what it wrote.
    const ScopedCopyInto copy(node_bytes);
    for (int m = 0; m < h.locals; ++m) {
      copy(dst + (h.node_index * h.locals + m) * bytes, pe.ptr(src, h.node.pe(m)), bytes);
    }
  }
  const uint64_t sequence = h.cross.next_collective();
  announce_entered(pe, h.cross, sequence, {(h.node_index + h.nodes - 1) % h.nodes});
  std::vector<Range> blocks;
  for (int k = 0; k < h.nodes; ++k) {
    blocks.push_back(Range{k * node_bytes + parts[h.local].begin, parts[h.local].count});
  }
  ring_allgather_bytes(pe, h.cross, dst, blocks, sequence);
  barrier(pe, h.node);
  {
    const ScopedCopyInto copy(bytes * size_t(h.locals - 1) * size_t(h.nodes - 1));
    for (int m = 0; m < h.locals; ++m) {
      if (m == h.local) continue;
      const auto* peer = static_cast<const std::byte*>(pe.ptr(dst, h.node.pe(m)));
      for (int k = 0; k < h.nodes; ++k) {
        if (k == h.node_index) continue;
        const size_t at = k * node_bytes + parts[m].begin;
        copy(dst + at, peer + at, parts[m].count);
      }
    }
  }
  barrier(pe, h.node);
}

}  // namespace

void allgather(Pe& pe, Team& team, void* dst, const void* src, size_t count, DType dtype,
               CollAlgo algo) {
  const trace::Scope span("allgather", "collective");
  check_member(pe, team, "allgather");
  auto* out = static_cast<std::byte*>(dst);
  const size_t bytes = count * dtype_size(dtype);
  switch (algo) {
    case CollAlgo::kRing:
      return ring_allgather(pe, team, out, src, bytes);
    case CollAlgo::kHier:
      return hier_allgather(pe, team, out, src, bytes);
  }
  throw InvalidArgument("allgather algorithm " + std::to_string(int(algo)) +
                        " is not one of: ring, hier");
}

}  // namespace symmesh
