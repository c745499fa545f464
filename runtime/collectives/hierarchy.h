// The two-level view of a team the hierarchical collectives use: the members on this node
// (`node`, L of them) and the members with the same place on every node (`cross`, K nodes).
#pragma once

#include "runtime/pe.h"

namespace symmesh {

struct Hierarchy {
  Team& node;
  Team& cross;
  int local;  // my index in `node`
  int locals;
  int node_index;  // my index in `cross`
  int nodes;
};

// Creates the two sub-teams on first use (collective over `team`) and caches them. Throws
// InvalidArgument when the team does not have the same count of members on every node.
Hierarchy hierarchy_of(Pe& pe, Team& team);

void check_member(const Pe& pe, const Team& team, const char* what);

}  // namespace symmesh
