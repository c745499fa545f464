#include "runtime/barrier.h"

#include <algorithm>

#include "common/trace.h"
#include "runtime/barrier/inter_node.h"

namespace symmesh {
namespace {

// The largest leader count that auto still finishes in one round: the k-ary slots hold k <= 16.
constexpr size_t kMaxOneRoundLeaders = 16;

// What auto runs among `leaders` node leaders: one round in which every leader signals every
// other (k-ary with k = n) while that is at most 15 signals a leader, so a barrier costs one
// network latency on any transport; beyond, dissemination (log2 n rounds of one signal).
// Pull is never picked: over tcp every check of a peer's counter is a round trip through its
// io thread, and on verbs its reads are round trips too, where a pushed signal is one way.
BarrierOptions resolved(const BarrierOptions& options, size_t leaders) {
  if (options.algo != BarrierAlgo::kAuto) return options;
  if (leaders <= kMaxOneRoundLeaders) {
    return BarrierOptions{BarrierAlgo::kKary, static_cast<int>(std::max<size_t>(leaders, 2))};
  }
  return BarrierOptions{BarrierAlgo::kDissemination, options.k};
}

}  // namespace

void barrier(Pe& pe, Team& team) {
  barrier(pe, team, pe.node().config().barrier);
}

void barrier(Pe& pe, Team& team, const BarrierOptions& requested) {
  const trace::Scope span("barrier", "barrier");
  if (team.my_index() < 0) {
    throw InvalidArgument("PE " + std::to_string(pe.my_pe()) + " is not a member of team '" +
                          team.name() + "'");
  }
  if (requested.algo == BarrierAlgo::kKary && (requested.k < 2 || requested.k > 16)) {
    throw InvalidArgument("kary barrier radix k=" + std::to_string(requested.k) +
                          " is outside 2..16");
  }
  const BarrierOptions options = resolved(requested, team.leaders().size());
  const uint64_t epoch = team.next_barrier_epoch();
  const Deadline deadline = pe.deadline();
  intra_node_arrive(pe, team, epoch, deadline);
  if (team.is_leader() && team.leaders().size() > 1) {
    const auto& leaders = team.leaders();
    const int me = team.leader_index();
    switch (options.algo) {
      case BarrierAlgo::kDissemination:
        dissemination_barrier(pe, team, leaders, me, epoch, deadline);
        break;
      case BarrierAlgo::kKary:
        kary_barrier(pe, team, leaders, me, epoch, options.k, deadline);
        break;
      case BarrierAlgo::kPull:
        pull_barrier(pe, team, leaders, me, epoch, deadline);
        break;
      case BarrierAlgo::kAuto:  // resolved above
        break;
    }
  }
  intra_node_release(pe, team, epoch, deadline);
}

}  // namespace symmesh
