// One run of a fused operator on one PE: its compute and comm roles (ops/roles) between an
// opening barrier and a timed finish.
#pragma once

#include <functional>

#include "ops/fused/operator.h"
#include "ops/roles/comm_port.h"
#include "ops/roles/local_counter.h"
#include "ops/roles/roles.h"
#include "runtime/pe.h"

namespace symmesh {

// One run of a fused operator: a barrier (so no PE reuses memory a peer still reads from the
// previous run), then the compute and comm roles, then `finish` (still timed). compute(i)
// returns thread i's GEMM busy time. The figures: wall time, the compute threads' mean busy
// time, the bytes the comm threads moved, 2*m*n*k flops.
RunFigures run_pipelined(Pe& pe, const FusedOptions& options,
                         const std::function<double(int)>& compute,
                         const std::function<void(int, CommPort&)>& comm,
                         const std::function<void()>& finish = {});

}  // namespace symmesh
