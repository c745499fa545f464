// Broadcast: member `root`'s `bytes` land in every member's dst. Hierarchical, one pass:
//   (1) the root puts its bytes straight into dst of the member with its own local place on
//       every other node (each announces it entered the call first, so a put never lands on
//       bytes its node still copies from the call before), with a signal;
//   (2) every node's other members copy them from that member through shared memory (on the
//       root's node, from the root's dst, which the root copied its input into).
// Network bytes: (K-1) x bytes, all from the root. Every member that did not receive over the
// wire copies bytes once; two node barriers bracket the copies.
#include <cstring>

#include "common/errors.h"
#include "common/streaming_copy.h"
#include "common/trace.h"
#include "runtime/barrier.h"
#include "runtime/collectives.h"
#include "runtime/collectives/hierarchy.h"
#include "runtime/collectives/ring.h"
#include "runtime/layout.h"

namespace symmesh {
namespace {

// (1): the root's cross team, the members with the root's local place.
void to_every_node(Pe& pe, const Hierarchy& h, std::byte* dst, const void* src, size_t bytes,
                   int root_node) {
  const uint64_t sequence = h.cross.next_collective();
  uint64_t* arrived = pe.sync_slot(h.cross, slot::kPerSource + root_node);
  if (h.node_index != root_node) {
    announce_entered(pe, h.cross, sequence, {root_node});
    pe.signal_wait_until(
        arrived, Cmp::kGe, sequence, pe.deadline(),
        "broadcast waiting for the bytes of PE " + std::to_string(h.cross.pe(root_node)));
    return;
  }
  if (dst != src) std::memcpy(dst, src, bytes);
  for (int k = 0; k < h.nodes; ++k) {
    if (k == root_node) continue;
    wait_entered(pe, h.cross, sequence, k);
    pe.put_signal(dst, src, bytes, arrived, sequence, SignalOp::kSet, h.cross.pe(k));
  }
}

}  // namespace

void broadcast(Pe& pe, Team& team, void* dst, const void* src, size_t bytes, int root) {
  const trace::Scope span("broadcast", "collective");
  check_member(pe, team, "broadcast");
  if (root < 0 || root >= team.size()) {
    throw InvalidArgument("broadcast: root " + std::to_string(root) + " is outside the team's 0.." +
                          std::to_string(team.size() - 1));
  }
  if (bytes == 0) return;
  const Hierarchy h = hierarchy_of(pe, team);
  const int root_node = root / h.locals, root_local = root % h.locals;
  auto* out = static_cast<std::byte*>(dst);
  if (h.local == root_local) to_every_node(pe, h, out, src, bytes, root_node);
  if (h.locals == 1) return;
  barrier(pe, h.node);  // the member holding the bytes on this node has them in its dst
  if (h.local != root_local) {
    const ScopedCopyInto copy(bytes);
    copy(out, pe.ptr(dst, h.node.pe(root_local)), bytes);
  }
  barrier(pe, h.node);  // ...and keeps them until its node copied them
}

}  // namespace symmesh
