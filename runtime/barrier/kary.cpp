// V2, k-ary group dissemination among n leaders.
// Cost: ceil(log_k n) rounds; in round r each leader signals the leaders j * k^r ahead for
// j = 1..k-1 (only those closer than n, so no leader hears twice) and waits for as many.
// After round r a leader has heard, directly or not, from the k^(r+1) leaders behind it.
#include "runtime/barrier/inter_node.h"

namespace symmesh {

void kary_barrier(Pe& pe, const Team& team, const std::vector<int>& leaders, int me, uint64_t epoch,
                  int k, Deadline deadline) {
  const int n = static_cast<int>(leaders.size());
  for (int64_t round = 0, step = 1; step < n; ++round, step *= k) {
    auto slot_of = [&](int j) {
      return pe.sync_slot(team, slot::kKary + static_cast<int>(round) * (k - 1) + (j - 1));
    };
    for (int j = 1; j < k && j * step < n; ++j) {
      pe.signal_set(slot_of(j), epoch, leaders[(me + j * step) % n]);
    }
    for (int j = 1; j < k && j * step < n; ++j) {
      const int from = leaders[(me - j * step % n + n) % n];
      pe.signal_wait_until(slot_of(j), Cmp::kGe, epoch, deadline,
                           "kary barrier on team '" + team.name() + "' (epoch " +
                               std::to_string(epoch) + ", k=" + std::to_string(k) + ") round " +
                               std::to_string(round) + " waiting for PE " + std::to_string(from),
                           from);
    }
  }
}

}  // namespace symmesh
