#include "runtime/collectives/hierarchy.h"

namespace symmesh {

void check_member(const Pe& pe, const Team& team, const char* what) {
  if (team.my_index() < 0) {
    throw InvalidArgument(std::string(what) + ": PE " + std::to_string(pe.my_pe()) +
                          " is not a member of team '" + team.name() + "'");
  }
}

Hierarchy hierarchy_of(Pe& pe, Team& team) {
  if (!team.uniform()) {
    throw InvalidArgument("hierarchical algorithm on team '" + team.name() +
                          "': every node must hold the same number of its members, "
                          "contiguous in team order; use --algo ring");
  }
  const int locals = static_cast<int>(team.local_members().size());
  const int nodes = team.size() / locals;
  const int local = team.my_index() % locals;
  const int node_index = team.my_index() / locals;
  if (!team.node_part) {
    // Each member passes its own node's range: the split agrees on one team index for all
    // of these disjoint parts (as team_split_2d does), and likewise for the cross parts.
    team.node_part =
        pe.team_split_strided(team, node_index * locals, 1, locals, team.name() + ".node");
    team.cross_part = pe.team_split_strided(team, local, locals, nodes, team.name() + ".cross");
  }
  return Hierarchy{*team.node_part, *team.cross_part, local, locals, node_index, nodes};
}

}  // namespace symmesh
