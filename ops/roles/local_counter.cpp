#include "ops/roles/local_counter.h"

namespace symmesh {

void LocalCounter::wait_at_least(uint64_t value, Pe& pe, const std::string& what) const {
  wait_until(
      pe.node().doorbell(), pe.deadline(), [&] { return load() >= value; },
      [&] {
        return "PE " + std::to_string(pe.my_pe()) + ": " + what + ": waited for " +
               std::to_string(value) + ", saw " + std::to_string(load());
      },
      pe.node().wait_policy());
}

}  // namespace symmesh
