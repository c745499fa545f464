// MoE dispatch and both combines over verbs, on 2 nodes x 2 ranks: the forwarders' records and
// the ring tails travel as RDMA writes and remote atomics that no CPU at the target handles,
// the heads return as RDMA writes too. Small shapes with rings of a few chunks (so the rings
// wrap and the heads must come back), both partial dtypes, verified against the reference and
// bitwise deterministic across runs. The guest emulates the CPU, hence the sizes.
#include <gtest/gtest.h>

#include "jobs/moe/runner.h"
#include "ops/enum_words.h"
#include "tests/softroce/verbs_job.h"

namespace symmesh {
namespace {

MoeReport run_on_verbs(const MoeJob& job) {
  return pe0_report_over_verbs<MoeReport>([&](Pe& pe) { return run_moe_job(pe, job); });
}

TEST(VerbsMoe, DispatchAndBothCombinesVerifyOverRdma) {
  MoeJob job;
  job.options.tokens = 37;
  job.options.hidden = 64;
  job.options.topk = 4;
  job.options.experts = 8;
  job.options.channels = 2;
  job.options.chunk_tokens = 2;
  job.options.rdma_ring_tokens = 4;
  job.iters = 2;
  job.verify = true;
  job.op = MoeOp::kDispatch;
  const MoeReport dispatched = run_on_verbs(job);
  EXPECT_TRUE(dispatched.verified) << "dispatch";
  EXPECT_GT(dispatched.inter_node_bytes, 0);
  job.op = MoeOp::kCombine;
  for (MoeAlgo algo : {MoeAlgo::kHier, MoeAlgo::kFlat}) {
    for (DType partial : {DType::kBF16, DType::kF32}) {
      job.options.algo = algo;
      job.options.partial_dtype = partial;
      job.options.biases = partial == DType::kF32 ? 2 : 0;
      job.options.weighting = partial == DType::kF32 ? MoeWeighting::kNone : MoeWeighting::kTopk;
      const std::string what = wire::word(algo) + " combine, " + wire::word(partial) + " partials";
      SCOPED_TRACE(what);
      const MoeReport r = run_on_verbs(job);
      EXPECT_TRUE(r.verified) << what << ": max_abs_err " << r.max_abs_err;
      EXPECT_TRUE(r.deterministic) << what;
      EXPECT_GT(r.inter_node_bytes, 0) << what;
    }
  }
}

}  // namespace
}  // namespace symmesh
