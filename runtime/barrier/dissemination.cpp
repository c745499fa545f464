// V1, dissemination barrier among n leaders.
// Cost: ceil(log2 n) rounds; in round r each leader sets one slot of the leader 2^r ahead
// and waits for its own slot r. n x ceil(log2 n) signals of 8 bytes in all.
#include "runtime/barrier/inter_node.h"

namespace symmesh {

void dissemination_barrier(Pe& pe, const Team& team, const std::vector<int>& leaders, int me,
                           uint64_t epoch, Deadline deadline) {
  const int n = static_cast<int>(leaders.size());
  for (int round = 0, distance = 1; distance < n; ++round, distance *= 2) {
    uint64_t* slot = pe.sync_slot(team, slot::kDissemination + round);
    pe.signal_set(slot, epoch, leaders[(me + distance) % n]);
    const int from = leaders[(me - distance + n) % n];
    pe.signal_wait_until(slot, Cmp::kGe, epoch, deadline,
                         "dissemination barrier on team '" + team.name() + "' (epoch " +
                             std::to_string(epoch) + ") round " + std::to_string(round) +
                             " waiting for PE " + std::to_string(from),
                         from);
  }
}

}  // namespace symmesh
