// The fused operators over verbs: their comm threads drive a PE's queue pairs while the PE's
// compute threads wait on flags that RDMA writes (no CPU at the target), on 2 nodes x 2 ranks,
// both stage transfers of matmul-reduce-scatter and two comm threads. Small shapes: the guest
// emulates the CPU.
#include <gtest/gtest.h>

#include "jobs/fused/runner.h"
#include "ops/enum_words.h"
#include "tests/softroce/verbs_job.h"

namespace symmesh {
namespace {

FusedReport run_on_verbs(const FusedJob& job) {
  Gemm gemm;
  return pe0_report_over_verbs<FusedReport>([&](Pe& pe) { return run_fused_job(pe, gemm, job); });
}

TEST(VerbsFused, EveryOperatorVerifiesOverRdma) {
  for (FusedOp op :
       {FusedOp::kMatmulReduceScatter, FusedOp::kGemmAllreduce, FusedOp::kAllgatherMatmul}) {
    for (auto [transfer, comm_threads] :
         {std::pair{StageTransfer::kPull, 1}, std::pair{StageTransfer::kPush, 2}}) {
      FusedJob job;
      job.options.op = op;
      job.options.m = 45;
      job.options.n = 21;
      job.options.k = 17;
      job.options.dtype = DType::kBF16;
      job.options.tile_m = 8;
      job.options.tile_n = 16;
      job.options.subtile_m = 4;
      job.options.comm_interval = 1;
      job.options.transfer = transfer;
      job.options.comm_threads = comm_threads;
      job.mode = FusedMode::kFused;
      job.iters = 2;
      job.verify = true;
      const FusedReport r = run_on_verbs(job);
      EXPECT_TRUE(r.verified) << wire::word(op) << " " << wire::word(transfer) << ": max_abs_err "
                              << r.max_abs_err;
      EXPECT_TRUE(r.deterministic) << wire::word(op);
      EXPECT_GT(r.wire_bytes, 0u) << wire::word(op);
    }
  }
}

}  // namespace
}  // namespace symmesh
