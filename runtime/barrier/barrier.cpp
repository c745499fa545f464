#include "runtime/barrier.h"

#include "common/trace.h"
#include "runtime/barrier/inter_node.h"

namespace symmesh {

BarrierAlgo parse_barrier_algo(const std::string& name) {
  if (name == "dissemination") return BarrierAlgo::kDissemination;
  if (name == "kary") return BarrierAlgo::kKary;
  if (name == "pull") return BarrierAlgo::kPull;
  throw InvalidArgument("barrier algorithm '" + name +
                        "' is not one of: dissemination, kary, pull");
}

const char* barrier_algo_name(BarrierAlgo algo) {
  switch (algo) {
    case BarrierAlgo::kDissemination:
      return "dissemination";
    case BarrierAlgo::kKary:
      return "kary";
    case BarrierAlgo::kPull:
      return "pull";
  }
  return "?";
}

void barrier(Pe& pe, Team& team) {
  barrier(pe, team, pe.node().config().barrier);
}

void barrier(Pe& pe, Team& team, const BarrierOptions& options) {
  const trace::Scope span("barrier", "barrier");
  if (team.my_index() < 0) {
    throw InvalidArgument("PE " + std::to_string(pe.my_pe()) + " is not a member of team '" +
                          team.name() + "'");
  }
  if (options.algo == BarrierAlgo::kKary && (options.k < 2 || options.k > 16)) {
    throw InvalidArgument("kary barrier radix k=" + std::to_string(options.k) +
                          " is outside 2..16");
  }
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
    }
  }
  intra_node_release(pe, team, epoch, deadline);
}

}  // namespace symmesh
