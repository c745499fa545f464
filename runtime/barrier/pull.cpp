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
  std::atomic_ref<uint64_t>(*mine).store(epoch, std::memory_order_release);
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
