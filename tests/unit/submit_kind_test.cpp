// The CLI's job kinds as tables: every row names a real field of its kind's message, the
// defaults reach the job, and a value that does not fit is refused naming its flag.
#include <gtest/gtest.h>

#include "client/submit/submit_kind.h"
#include "common/errors.h"

namespace symmesh {
namespace {

TEST(SubmitKinds, EveryRowNamesAFieldOfItsKindsMessage) {
  CLI::App app;
  CLI::App* submit = app.add_subcommand("submit");
  for (const SubmitKind& kind : submit_kinds()) {
    EXPECT_NO_THROW(SubmitCommand(*submit, kind)) << kind.name;
    EXPECT_NO_THROW(make_spec(kind, {})) << kind.name;
  }
}

TEST(SubmitKinds, DefaultsAndFixedFieldsReachTheJob) {
  const wire::JobSpec combine = make_spec(moe_kind("combine"), {{"--tokens", "128"}});
  ASSERT_TRUE(combine.has_moe());
  EXPECT_EQ(combine.moe().op(), wire::MOE_OP_COMBINE);
  EXPECT_EQ(combine.moe().tokens(), 128u);
  EXPECT_EQ(combine.moe().algo(), wire::MOE_ALGO_HIER);
  EXPECT_EQ(combine.moe().rdma_ring_tokens(), 64u);
  EXPECT_FALSE(combine.moe().verify());

  const wire::JobSpec matmul = make_spec(matmul_kind(), {{"--verify", "true"}, {"--m", "64"}});
  ASSERT_TRUE(matmul.has_matmul());
  EXPECT_EQ(matmul.matmul().m(), 64u);
  EXPECT_EQ(matmul.matmul().tile_n(), 512u);
  EXPECT_EQ(matmul.matmul().seed(), 1u);
  EXPECT_TRUE(matmul.matmul().verify());

  const wire::JobSpec collective = make_spec(collective_kind(), {{"--bytes", "64KiB"}});
  EXPECT_EQ(collective.collective().bytes(), 65536u);
  EXPECT_EQ(collective.collective().dtype(), wire::DATA_TYPE_F32);

  const wire::JobSpec barrier = make_spec(barrier_kind(), {});
  ASSERT_TRUE(barrier.has_barrier());
  EXPECT_EQ(barrier.barrier().iters(), 1000u);
  EXPECT_EQ(barrier.barrier().algo(), wire::BARRIER_ALGO_UNSPECIFIED);  // the cluster's default
}

TEST(SubmitKinds, AParsedCommandLineMakesItsJobWithTheDefaultsOfWhatItLeftOut) {
  CLI::App app;
  CLI::App* submit = app.add_subcommand("submit");
  SubmitCommand matmul(*submit, matmul_kind());
  app.parse("submit matmul --op gemm-allreduce --m 16 --n 8 --k 8 --verify", false);
  ASSERT_TRUE(matmul.parsed());
  const wire::JobSpec spec = matmul.spec();
  EXPECT_EQ(spec.matmul().op(), wire::MATMUL_OP_GEMM_ALLREDUCE);
  EXPECT_EQ(spec.matmul().m(), 16u);
  EXPECT_EQ(spec.matmul().tile_n(), 512u);
  EXPECT_EQ(spec.matmul().mode(), wire::MATMUL_MODE_BOTH);
  EXPECT_TRUE(spec.matmul().verify());
}

TEST(SubmitKinds, AValueThatDoesNotFitIsRefusedNamingItsFlag) {
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
           {"--hidden", "abc"}, {"--topk", "4294967296"}, {"--seed", "-1"}}) {
    try {
      make_spec(moe_kind("dispatch"), {{flag, value}});
      ADD_FAILURE() << flag << " " << value << " was taken";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(flag), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(make_spec(collective_kind(), {{"--bytes", "4X"}}), InvalidArgument);
  try {
    make_spec(collective_kind(), {{"--op", "allreduce"}, {"--dtype", "f64"}});
    ADD_FAILURE() << "--dtype f64 was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "--dtype 'f64' is not one of: f32, bf16, f16");
  }
}

// An enum option offers exactly its enum's words (the .proto file is the one list).
TEST(SubmitKinds, AnEnumOptionAcceptsTheWordsOfItsEnumAndNothingElse) {
  CLI::App app;
  CLI::App* submit = app.add_subcommand("submit");
  SubmitCommand collective(*submit, collective_kind());
  EXPECT_THROW(app.parse("submit collective --op gather --bytes 64", false), CLI::ValidationError);
  CLI::App again;
  SubmitCommand parsed(*again.add_subcommand("submit"), collective_kind());
  again.parse("submit collective --op reduce-scatter --bytes 64 --algo hier", false);
  EXPECT_EQ(parsed.spec().collective().op(), wire::COLLECTIVE_OP_REDUCE_SCATTER);
  EXPECT_EQ(parsed.spec().collective().algo(), wire::COLLECTIVE_ALGO_HIER);
}

}  // namespace
}  // namespace symmesh
