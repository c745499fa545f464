#include "runtime/collectives.h"

#include "common/errors.h"

namespace symmesh {

CollAlgo parse_coll_algo(const std::string& name) {
  if (name == "ring") return CollAlgo::kRing;
  if (name == "hier") return CollAlgo::kHier;
  if (name == "direct") return CollAlgo::kDirect;
  throw InvalidArgument("collective algorithm '" + name + "' is not one of: ring, hier, direct");
}

CollAlgo auto_coll_algo(const ClusterShape& shape) {
  return shape.nodes > 1 && shape.ranks_per_node > 1 ? CollAlgo::kHier : CollAlgo::kRing;
}

const char* coll_algo_name(CollAlgo algo) {
  switch (algo) {
    case CollAlgo::kRing:
      return "ring";
    case CollAlgo::kHier:
      return "hier";
    case CollAlgo::kDirect:
      return "direct";
  }
  return "?";
}

}  // namespace symmesh
