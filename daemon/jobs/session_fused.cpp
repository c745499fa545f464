#include "daemon/jobs/session_fused.h"

#include <algorithm>
#include <cstring>

#include "api/fused_call_mode.h"
#include "api/op_limits.h"
#include "api/staging_layout.h"
#include "daemon/jobs/job.h"
#include "daemon/jobs/staged_blocks.h"
#include "ops/enum_words.h"
#include "ops/fused/operator.h"
#include "runtime/barrier.h"

namespace symmesh {
namespace {

// A call's mode (args[3], a wire::MatmulMode).
FusedMode session_mode(uint64_t code) {
  check_fused_call_mode(code);
  if (code == wire::MATMUL_MODE_SEQUENTIAL) return FusedMode::kSequential;
  if (code == wire::MATMUL_MODE_AUTO) return FusedMode::kAuto;
  return FusedMode::kFused;
}

}  // namespace

uint64_t run_session_fused(Pe& pe, const attach::Request& r, attach::StagingArea& staging,
                           uint64_t memory_bytes, const FusedThreads& threads) {
  wire::check_enum(wire::DataType(r.dtype), "dtype");
  const FusedMode mode = session_mode(r.args[3]);
  FusedOptions o;
  o.compute_threads = threads.compute;
  o.comm_threads = threads.comm;
  o.op = r.op == attach::Op::kGemmAllReduce         ? FusedOp::kGemmAllreduce
         : r.op == attach::Op::kMatmulReduceScatter ? FusedOp::kMatmulReduceScatter
                                                    : FusedOp::kAllgatherMatmul;
  o.dtype = dtype_of(wire::DataType(r.dtype), DType::kF32);
  const bool sharded = o.op == FusedOp::kAllgatherMatmul;
  const int n_pes = pe.n_pes();
  for (const uint64_t dim : {r.args[0], r.args[1], r.args[2]}) {
    if (dim == 0 || dim > uint64_t(kMaxFusedDim)) {
      throw InvalidArgument("a dimension of " + std::to_string(dim) +
                            " is out of range: allowed 1 to " + std::to_string(kMaxFusedDim));
    }
  }
  const uint64_t a_rows = r.args[0];
  o.m = int64_t(sharded ? a_rows * uint64_t(n_pes) : a_rows);  // every PE holds as many rows
  o.n = int64_t(r.args[1]);
  o.k = int64_t(r.args[2]);
  validate(o, n_pes);
  const size_t element = dtype_size(o.dtype);
  // The staged operands' places are checked before the plan's exchange, so a PE's refusal
  // comes before any collective step. A and B are the inputs' block (up to where C would
  // follow); the results are the outputs'.
  const auto in =
      attach::fused_block(a_rows, uint64_t(o.m), r.args[1], r.args[2], sharded, element);
  const StagedBlocks blocks(r, in.c);
  const std::byte* a = staging.range(blocks.inputs() + in.a, a_rows * o.k * element, "A");
  const std::byte* b = staging.range(blocks.inputs() + in.b, uint64_t(o.k) * o.n * element, "B");
  const std::string plan_key = mode == FusedMode::kAuto ? fused_plan_key(o, pe) : "";
  const std::optional<FusedMode> plan =
      mode == FusedMode::kAuto ? agreed_plan(pe, &daemon_fused_plans(), plan_key) : mode;
  // What the daemon holds for the call (A, B, the f32 result, the gathered A) and the work it
  // does, bounded before anything is allocated: a process names the sizes. A call that plans
  // runs both modes several times.
  const uint64_t held =
      ((a_rows + uint64_t(o.n) + (sharded ? uint64_t(o.m) : 0)) * uint64_t(o.k) * element +
       uint64_t(o.m) * uint64_t(o.n) * 4) *
      (plan ? 1 : kPlanMemoryFactor);
  const double flops = 2.0 * double(o.m) * double(o.n) * double(o.k) * (plan ? 1 : kPlanWorkFactor);
  const uint64_t most_held =
      memory_bytes ? std::min(memory_bytes, attach::kMaxStagingBytes) : attach::kMaxStagingBytes;
  if (held > most_held || flops > kMaxSessionFusedFlops) {
    throw InvalidArgument(
        wire::word(o.op) + " of " + std::to_string(o.m) + " x " + std::to_string(o.k) + " by " +
        std::to_string(o.k) + " x " + std::to_string(o.n) + " is too large for a session call" +
        (plan ? ""
              : " that plans (mode auto runs both modes " + std::to_string(kPlanRuns + 1) +
                    " times; pass fused or sequential)") +
        ": it would hold " + std::to_string(held) + " bytes; allowed up to " +
        std::to_string(most_held) + " bytes of operands" +
        (most_held < attach::kMaxStagingBytes ? " (this daemon's --job-memory over its PEs)" : "") +
        " and " + std::to_string(uint64_t(kMaxSessionFusedFlops)) + " flops");
  }
  FusedTensors t;
  t.a.assign(a, a + a_rows * o.k * element);
  t.b.assign(b, b + uint64_t(o.k) * o.n * element);
  if (plan) {
    shape_tensors(o, pe, t);
    const auto op = *plan == FusedMode::kFused ? make_fused(pe, daemon_gemm(), o)
                                               : make_sequential(pe, daemon_gemm(), o);
    op->run(t);
    barrier_all(pe);  // nobody frees the workspace while a peer may still read from it
  } else {
    t = plan_by_measuring(pe, daemon_gemm(), o, std::move(t), &daemon_fused_plans(), plan_key);
  }

  const uint64_t c_rows = t.c.size() / uint64_t(o.n);
  const auto out = attach::fused_block(a_rows, c_rows, r.args[1], r.args[2], sharded, element);
  // C's offset does not depend on its rows (in.c == out.c), so this cannot wrap: spill_at is
  // past stage_at + in.c.
  const uint64_t at = blocks.outputs(out.end - out.c) - out.c;
  staging.grow(at + out.end, "the fused op's result");
  store_from_f32(staging.range(at + out.c, c_rows * o.n * element, "C"), t.c.data(), t.c.size(),
                 o.dtype);
  if (sharded) {
    std::memcpy(staging.range(at + out.gathered, t.gather_out.size(), "the gathered A"),
                t.gather_out.data(), t.gather_out.size());
  }
  return c_rows;
}

}  // namespace symmesh
