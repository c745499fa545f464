#include "runtime/collectives.h"

#include "common/errors.h"

namespace symmesh {

CollAlgo parse_coll_algo(const std::string& name) {
  if (name == "ring") return CollAlgo::kRing;
  if (name == "hier") return CollAlgo::kHier;
  if (name == "direct") return CollAlgo::kDirect;
  throw InvalidArgument("collective algorithm '" + name + "' is not one of: ring, hier, direct");
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
