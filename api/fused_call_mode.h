// The modes a fused call takes (a wire::MatmulMode), which the process's library checks before it
// asks and the daemon checks again.
#pragma once

#include <cstdint>
#include <string>

#include "common/errors.h"
#include "wire/enum_text.h"
#include "wire/jobs.pb.h"

namespace symmesh {

// A fused call's mode: unset runs the pipeline, as fused does; `both` is a job's, not a call's.
inline void check_fused_call_mode(uint64_t mode) {
  if (mode == wire::MATMUL_MODE_UNSPECIFIED || mode == wire::MATMUL_MODE_FUSED ||
      mode == wire::MATMUL_MODE_SEQUENTIAL || mode == wire::MATMUL_MODE_AUTO) {
    return;
  }
  const auto named = wire::MatmulMode_IsValid(int(mode))
                         ? std::string(wire::enum_text(wire::MatmulMode(mode)))
                         : std::to_string(mode);
  throw InvalidArgument("mode " + named +
                        " is not a fused call's mode: allowed fused, sequential, auto");
}

}  // namespace symmesh
