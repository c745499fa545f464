// The modes a fused call takes (a wire::MatmulMode), which the process's library checks before it
// asks and the daemon checks again.
#pragma once

#include <cstdint>
#include <string>

#include "common/errors.h"
#include "wire/jobs.pb.h"

namespace symmesh {

// A fused call's mode: unset runs the pipeline, as fused does; `both` is a job's, not a call's.
inline void check_fused_call_mode(uint64_t mode) {
  if (mode == wire::MATMUL_MODE_UNSPECIFIED || mode == wire::MATMUL_MODE_FUSED ||
      mode == wire::MATMUL_MODE_SEQUENTIAL || mode == wire::MATMUL_MODE_AUTO) {
    return;
  }
  throw InvalidArgument("mode " + std::to_string(mode) +
                        " is not a fused call's mode: allowed fused, sequential, auto");
}

}  // namespace symmesh
