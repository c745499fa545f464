// V3, centralised pull barrier among n leaders (the default, the SHMEM barrier design): each leader
// publishes its arrival in its own slot, with no remote write at all, then reads every other
// leader's slot until it reaches the epoch.
// Cost: one round; n-1 remote reads per leader (repeated while a peer has not arrived).
#include <algorithm>
#include <atomic>

#include "runtime/barrier/inter_node.h"

namespace symmesh {

void pull_barrier(Pe& pe, const Team& team, const std::vector<int>& leaders, int me, uint64_t epoch,
                  Deadline deadline) {
  const int n = static_cast<int>(leaders.size());
  uint64_t* mine = pe.sync_slot(team, slot::kPullArrival);
  // Never a CPU store: a peer reads this slot with a remote 8-byte get, which verbs makes a
  // device fetch-add of 0. On a device whose atomics are its own read-modify-write (soft-RoCE,
  // many NICs) that writes the old value back over a CPU store landing inside it: the arrival
  // is erased and every peer waits until the deadline (seen in about 1 run in 40 of the verbs
  // suite). The own-node transport adds through the device on such a node and is a CPU
  // fetch-add elsewhere. Only this PE changes the slot (peers add 0), so it is read here.
  const uint64_t arrived = std::atomic_ref<uint64_t>(*mine).load(std::memory_order_relaxed);
  if (epoch != arrived) pe.atomic_add(mine, epoch - arrived, pe.my_pe());  // mod 2^64: = epoch
  Doorbell& bell = pe.node().doorbell();
  for (int i = 1; i < n; ++i) {
    const int peer = leaders[(me + i) % n];
    uint64_t seen = 0;
    // Each check is a remote read, whose round trip paces the loop; a peer that has not come
    // after a millisecond is then polled with sleeps growing to 200 us.
    const auto patient_until = Clock::now() + std::chrono::milliseconds(1);
    auto pause = std::chrono::microseconds(10);
    for (;;) {
      pe.get(&seen, mine, sizeof(seen), peer);
      if (seen >= epoch) break;
      if (bell.aborted()) throw AbortedError("pull barrier aborted: " + bell.abort_reason());
      if (Clock::now() >= deadline) {
        throw TimeoutError("PE " + std::to_string(pe.my_pe()) + ": pull barrier on team '" +
                           team.name() + "' (epoch " + std::to_string(epoch) + ") waiting for PE " +
                           std::to_string(peer) + ": its arrival slot is " + std::to_string(seen) +
                           ", expected >= " + std::to_string(epoch) + ": deadline passed");
      }
      if (Clock::now() < patient_until) continue;
      bell.park(bell.sequence(), pause);
      pause = std::min(pause * 2, std::chrono::microseconds(200));
    }
  }
}

}  // namespace symmesh
