#include "runtime/collectives.h"

#include "common/errors.h"

namespace symmesh {

CollAlgo parse_coll_algo(const std::string& name) {
  if (name == "ring") return CollAlgo::kRing;
  if (name == "hier") return CollAlgo::kHier;
  if (name == "direct") {
    throw InvalidArgument(
        "collective algorithm 'direct' is all-to-all's; allowed here: ring, hier");
  }
  throw InvalidArgument("collective algorithm '" + name + "' is not one of: ring, hier");
}

const char* coll_algo_name(CollAlgo algo) {
  switch (algo) {
    case CollAlgo::kRing:
      return "ring";
    case CollAlgo::kHier:
      return "hier";
  }
  return "?";
}

}  // namespace symmesh
