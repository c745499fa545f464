// Intra-node barrier over shared memory, pull mode as in the SHMEM barrier design's core-level
// sync. Cost: each member writes one local slot; the leader reads L-1 slots, then writes one
// release slot that L-1 members read. No transport traffic.
#include <atomic>

#include "runtime/barrier/inter_node.h"

namespace symmesh {
namespace {

void publish(Pe& pe, uint64_t* slot, uint64_t epoch) {
  std::atomic_ref<uint64_t>(*slot).store(epoch, std::memory_order_release);
  pe.node().doorbell().ring();
}

std::string what(const Team& team, const char* phase, int peer, uint64_t epoch) {
  return "intra-node barrier " + std::string(phase) + " on team '" + team.name() + "' (epoch " +
         std::to_string(epoch) + ") waiting for PE " + std::to_string(peer);
}

}  // namespace

void intra_node_arrive(Pe& pe, const Team& team, uint64_t epoch, Deadline deadline) {
  const auto& local = team.local_members();
  if (local.size() < 2) return;
  uint64_t* mine = pe.sync_slot(team, slot::kIntraArrival);
  if (!team.is_leader()) return publish(pe, mine, epoch);
  for (size_t i = 1; i < local.size(); ++i) {
    const auto* theirs = static_cast<const uint64_t*>(pe.ptr(mine, local[i]));
    pe.signal_wait_until(theirs, Cmp::kGe, epoch, deadline, what(team, "arrival", local[i], epoch),
                         local[i]);
  }
}

void intra_node_release(Pe& pe, const Team& team, uint64_t epoch, Deadline deadline) {
  const auto& local = team.local_members();
  if (local.size() < 2) return;
  uint64_t* release = pe.sync_slot(team, slot::kIntraRelease);
  if (team.is_leader()) return publish(pe, release, epoch);
  const auto* leader_release = static_cast<const uint64_t*>(pe.ptr(release, local[0]));
  pe.signal_wait_until(leader_release, Cmp::kGe, epoch, deadline,
                       what(team, "release", local[0], epoch), local[0]);
}

}  // namespace symmesh
