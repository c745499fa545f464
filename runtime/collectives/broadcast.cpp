// Broadcast: member `root`'s `bytes` land in every member's dst. Hierarchical, one pass:
//   (1) the root copies its input into its own dst, and puts it straight into dst of the
//       member with its local place on every other node (each announces it entered the call
//       first, so a put never lands on bytes its node still copies from the call before), with
//       a signal;
//   (2) every node's other members copy the bytes from that member (on the root's node, from
//       the root, while its puts go out) through shared memory, between two node barriers.
// Network bytes: (K-1) x bytes, all from the root. Every member that did not receive over the
// wire copies bytes once.
#include <cstring>
#include <optional>

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

// The root's cross team: the members with the root's local place, one per node.
struct RootPlace {
  Pe& pe;
  const Hierarchy& h;
  int node;  // the root's node, its index in the cross team
  uint64_t sequence;
  uint64_t* arrived;  // the signal of the root's bytes
};

RootPlace enter(Pe& pe, const Hierarchy& h, int root_node) {
  return {pe, h, root_node, h.cross.next_collective(),
          pe.sync_slot(h.cross, slot::kPerSource + root_node)};
}

// A member of the root's cross team on another node: the root's bytes in its dst.
void receive(const RootPlace& at) {
  announce_entered(at.pe, at.h.cross, at.sequence, {at.node});
  at.pe.signal_wait_until(
      at.arrived, Cmp::kGe, at.sequence, at.pe.deadline(),
      "broadcast waiting for the bytes of PE " + std::to_string(at.h.cross.pe(at.node)),
      at.h.cross.pe(at.node));
}

// The root: its bytes into every other node's member, each once it entered the call.
void send_to_every_node(const RootPlace& at, const void* src, size_t bytes, void* dst) {
  for (int k = 0; k < at.h.nodes; ++k) {
    if (k == at.node) continue;
    wait_entered(at.pe, at.h.cross, at.sequence, k);
    at.pe.put_signal(dst, src, bytes, at.arrived, at.sequence, SignalOp::kSet, at.h.cross.pe(k));
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
  const bool holds = h.local == root_local, is_root = holds && h.node_index == root_node;
  std::optional<RootPlace> place;
  if (holds) place.emplace(enter(pe, h, root_node));
  if (is_root && dst != src) std::memcpy(dst, src, bytes);
  if (holds && !is_root) receive(*place);
  if (h.locals > 1) barrier(pe, h.node);  // this node's holder has the bytes in its dst
  if (is_root) send_to_every_node(*place, src, bytes, dst);
  if (!holds) {
    const ScopedCopyInto copy(bytes);
    copy(static_cast<std::byte*>(dst), pe.ptr(dst, h.node.pe(root_local)), bytes);
  }
  if (h.locals > 1) barrier(pe, h.node);  // ...and keeps them until its node copied them
}

}  // namespace symmesh
