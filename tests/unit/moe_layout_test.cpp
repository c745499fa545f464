// The MoE groundwork: option validation, generated and file routings, the dispatch
// layout against a brute-force count, the channel split, the inter-node bytes of the
// hierarchical and flat combines, and the references.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "common/errors.h"
#include "jobs/moe/reference.h"
#include "ops/enum_words.h"
#include "ops/npy.h"
#include "tests/support/moe_shape.h"

namespace symmesh {
namespace {

std::string error_of(const MoeOptions& o, int nodes, int ranks) {
  try {
    validate(o, nodes, ranks);
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

TEST(MoeOptions, BadFieldsAreNamedWithTheirRange) {
  EXPECT_EQ(error_of(moe_shape(0, 8, 1, 4), 2, 2), "");  // an empty PE is fine
  EXPECT_NE(error_of(moe_shape(4, 12, 1, 4), 1, 1).find("hidden = 12 must be a multiple of 8"),
            std::string::npos);
  EXPECT_NE(error_of(moe_shape(4, 8, 1, 10), 2, 2).find("multiple of 4"), std::string::npos);
  EXPECT_NE(error_of(moe_shape(4, 8, 9, 8), 2, 2).find("topk = 9 is out of range: allowed 1 to 8"),
            std::string::npos);
  MoeOptions o = moe_shape(4, 8, 2, 8);
  o.rdma_ring_tokens = 16;
  o.chunk_tokens = 9;
  EXPECT_NE(error_of(o, 2, 2).find("larger than half of rdma_ring_tokens = 16: allowed up to 8"),
            std::string::npos);
  o.chunk_tokens = 8;
  o.partial_dtype = DType::kF16;
  EXPECT_NE(error_of(o, 2, 2).find("bf16 or f32"), std::string::npos);
  EXPECT_THROW(wire::parse_word<MoeWeighting>("softmax", "--weighting"), InvalidArgument);
  EXPECT_THROW(wire::parse_word<MoeAlgo>("ring", "--algo"), InvalidArgument);
}

TEST(MoeRouting, UniformIsDistinctNormalisedAndSeeded) {
  const MoeOptions o = moe_shape(300, 8, 8, 64);
  const Routing a = make_routing(o, 0, parse_routing("uniform", 7));
  EXPECT_EQ(a.experts, make_routing(o, 0, parse_routing("uniform", 7)).experts);
  EXPECT_NE(a.experts, make_routing(o, 1, parse_routing("uniform", 7)).experts);
  for (int64_t t = 0; t < o.tokens; ++t) {
    std::vector<int32_t> ids(&a.experts[t * 8], &a.experts[t * 8] + 8);
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << "token " << t;
    EXPECT_GE(ids.front(), 0);
    EXPECT_LT(ids.back(), 64);
    EXPECT_NEAR(std::accumulate(&a.weights[t * 8], &a.weights[t * 8] + 8, 0.0f), 1.0f, 1e-5);
  }
}

// The share of (token, expert) pairs that go to the 4 busiest experts.
double top4_share(const Routing& r, const MoeOptions& o) {
  const DispatchLayout l = dispatch_layout(r, o, ClusterShape{2, 2});
  std::vector<int64_t> counts = l.tokens_per_expert;
  std::sort(counts.rbegin(), counts.rend());
  return double(counts[0] + counts[1] + counts[2] + counts[3]) / double(r.tokens * r.topk);
}

TEST(MoeRouting, SkewedSendsMostTokensToAFewExperts) {
  const MoeOptions o = moe_shape(2000, 8, 2, 64);
  EXPECT_GT(top4_share(make_routing(o, 0, parse_routing("skewed", 1)), o), 0.5);
  EXPECT_LT(top4_share(make_routing(o, 0, parse_routing("uniform", 1)), o), 0.15);
}

TEST(MoeRouting, FileRoutingRoundTripsAndBadFilesAreNamed) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("symmesh-routing-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const MoeOptions o = moe_shape(3, 8, 2, 4);
  std::vector<int64_t> ids{0, 3, -1, 2, 1, 0};
  std::vector<float> weights{0.5f, 0.5f, 1.0f, 0.0f, 0.25f, 0.75f};
  auto write = [&] {
    write_npy((dir / "topk_idx_1.npy").string(), "<i8", ids.data(), 3, 2);
    write_npy_f32((dir / "topk_weights_1.npy").string(), weights.data(), 3, 2);
  };
  write();
  const Routing r = make_routing(o, 1, parse_routing(dir.string(), 1));
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 3, -1, 2, 1, 0}));
  EXPECT_EQ(r.weights, weights);
  auto error = [&] {
    try {
      make_routing(o, 1, parse_routing(dir.string(), 1));
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  ids[5] = 1;  // token 2 names expert 1 twice
  write();
  EXPECT_NE(error().find("token 2 names expert 1 twice"), std::string::npos) << error();
  ids[5] = 4;
  write();
  EXPECT_NE(error().find("allowed -1 (none) or 0 to 3"), std::string::npos) << error();
  EXPECT_NE(error().find("topk_idx_1.npy"), std::string::npos) << error();
  std::filesystem::remove_all(dir);
}

TEST(MoeLayout, CountsMatchABruteForceAndChannelsCoverEveryToken) {
  const ClusterShape shape{3, 2};
  const MoeOptions o = moe_shape(257, 8, 5, 12);
  const Routing r = make_routing(o, 4, parse_routing("skewed", 3));
  const DispatchLayout l = dispatch_layout(r, o, shape);
  for (int pe = 0; pe < shape.n_pes(); ++pe) {
    int64_t count = 0;
    for (int64_t t = 0; t < o.tokens; ++t) {
      bool any = false;
      for (int k = 0; k < o.topk; ++k) any = any || r.expert(t, k) / 2 == pe;
      count += any;
      EXPECT_EQ(l.goes_to_pe(t, pe), any);
    }
    EXPECT_EQ(l.tokens_per_pe[pe], count) << "PE " << pe;
  }
  EXPECT_EQ(std::accumulate(l.tokens_per_expert.begin(), l.tokens_per_expert.end(), int64_t{0}),
            o.tokens * o.topk);
  for (int channels : {1, 3, 300}) {
    int64_t next = 0;
    for (int c = 0; c < channels; ++c) {
      const TokenRange range = channel_tokens(o.tokens, channels, c);
      EXPECT_EQ(range.begin, next);
      EXPECT_LE(range.size(), o.tokens / channels + 1);
      next = range.end;
    }
    EXPECT_EQ(next, o.tokens);
  }
}

TEST(MoeLayout, HierarchicalMovesAtMostHalfOfFlatsInterNodeBytesAtTopk8) {
  const ClusterShape shape{2, 2};
  const MoeOptions o = moe_shape(1024, 7168, 8, 64);
  const Routing r = make_routing(o, 0, parse_routing("uniform", 1));
  const DispatchLayout l = dispatch_layout(r, o, shape);
  const int64_t hier = hier_inter_node_bytes(l, 0, o.hidden, 2);
  const int64_t flat = flat_inter_node_bytes(l, o, shape, 0, 2);
  EXPECT_GT(hier, 0);
  EXPECT_LE(hier * 2, flat) << "hier " << hier << " flat " << flat;
}

TEST(MoeReference, PartialsOfEveryPeSumToTheCombine) {
  const ClusterShape shape{2, 2};
  MoeOptions o = moe_shape(17, 16, 3, 8);
  for (MoeWeighting weighting : {MoeWeighting::kNone, MoeWeighting::kTopk}) {
    o.weighting = weighting;
    const Routing r = make_routing(o, 2, parse_routing("uniform", 5));
    const std::vector<uint16_t> x = moe_tokens(o, 2, InputSpec{5, ""});
    const std::vector<uint16_t> combined = reference_combine(o, r, x, {});
    std::vector<float> partial(o.hidden), sum(o.hidden);
    for (int64_t t = 0; t < o.tokens; ++t) {
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (int pe = 0; pe < shape.n_pes(); ++pe) {
        expert_partial(o, r, t, pe, shape.n_pes(), &x[t * o.hidden], partial.data());
        for (int64_t h = 0; h < o.hidden; ++h) sum[h] += partial[h];
      }
      for (int64_t h = 0; h < o.hidden; ++h) {
        const float expected = bf16_to_f32(combined[t * o.hidden + h]);
        EXPECT_NEAR(sum[h], expected, 1e-2f * std::max(1.0f, std::fabs(expected)))
            << wire::word(weighting) << " token " << t;
      }
    }
  }
  const std::vector<Routing> routings{make_routing(o, 0, parse_routing("uniform", 5)),
                                      make_routing(o, 1, parse_routing("uniform", 5)),
                                      make_routing(o, 2, parse_routing("uniform", 5)),
                                      make_routing(o, 3, parse_routing("uniform", 5))};
  const auto received = reference_dispatch(o, routings, shape, 3);
  for (size_t i = 1; i < received.size(); ++i) {
    EXPECT_TRUE(received[i - 1].source_pe < received[i].source_pe ||
                (received[i - 1].source_pe == received[i].source_pe &&
                 received[i - 1].source_token < received[i].source_token));
  }
}

}  // namespace
}  // namespace symmesh
