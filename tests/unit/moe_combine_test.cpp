// MoE combine, hierarchical and flat: every PE's combined_x against the f32 reference on 1 to 3
// nodes x 1 to 3 ranks, both weightings, 0 to 2 biases, both partial dtypes, skewed routing,
// topk above the PE count, an empty PE, rings of one chunk; bitwise determinism; and the
// hierarchical combine's inter-node bytes against the flat one's.
#include "ops/moe/combine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "jobs/moe/reference.h"
#include "ops/enum_words.h"
#include "tests/support/local_cluster.h"

namespace symmesh {
namespace {

struct Shape {
  int nodes;
  int ranks;
};

struct Outcome {
  std::vector<std::vector<std::byte>> combined;  // per PE
  int64_t inter_node_bytes = 0;                  // all PEs
};

// "pe0": every token's experts are 0..topk-1, all held by PE 0; else a generated routing.
Routing routing_for(const MoeOptions& o, int pe, const std::string& name) {
  if (name != "pe0") return make_routing(o, pe, parse_routing(name, 9));
  Routing r = make_routing(o, pe, parse_routing("uniform", 9));
  for (int64_t t = 0; t < r.tokens; ++t) {
    for (int k = 0; k < r.topk; ++k) r.experts[t * r.topk + k] = k;
  }
  return r;
}

Outcome run_combine(Shape shape, const MoeOptions& o, const std::string& routing_name,
                    int empty_pe = -1, size_t heap_per_rank = 24 << 20) {
  LocalCluster cluster(op_test_options(shape.nodes, shape.ranks, heap_per_rank));
  const int n = shape.nodes * shape.ranks;
  std::vector<MoeOptions> mine(n, o);
  if (empty_pe >= 0) mine[empty_pe].tokens = 0;
  Outcome outcome;
  outcome.combined.resize(n);
  std::vector<int64_t> bytes(n);
  cluster.run([&](Pe& pe) {
    const int me = pe.my_pe();
    const Routing routing = routing_for(mine[me], me, routing_name);
    const std::vector<uint16_t> x = moe_tokens(mine[me], me, InputSpec{9, ""});
    std::vector<std::vector<uint16_t>> biases;
    for (int i = 0; i < o.biases; ++i)
      biases.push_back(moe_bias(mine[me], me, i, InputSpec{9, ""}));
    const DispatchResult dispatched = dispatch(pe, o, x, routing);
    const CombineResult r = combine(pe, o, dispatched, routing, biases);
    outcome.combined[me] = r.combined_x;
    bytes[me] = r.inter_node_bytes;
    const auto expected = reference_combine(mine[me], routing, x, biases);
    ASSERT_EQ(r.combined_x.size(), expected.size() * 2);
    // bf16 partials are rounded twice on the way (8 bits each) and once at the end.
    const float tolerance = o.partial_dtype == DType::kBF16 ? 0.05f : 0.02f;
    for (size_t i = 0; i < expected.size(); ++i) {
      const float want = bf16_to_f32(expected[i]),
                  got = load_one(r.combined_x.data(), i, DType::kBF16);
      ASSERT_NEAR(got, want, tolerance * std::max(1.0f, std::fabs(want)))
          << wire::word(o.algo) << " PE " << me << " element " << i;
    }
  });
  for (int64_t b : bytes) outcome.inter_node_bytes += b;
  return outcome;
}

MoeOptions small(int experts, int topk) {
  MoeOptions o;
  o.tokens = 29;
  o.hidden = 32;
  o.topk = topk;
  o.experts = experts;
  o.channels = 2;
  o.chunk_tokens = 2;
  o.rdma_ring_tokens = 4;
  return o;
}

class MoeCombineShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(MoeCombineShapes, HierAndFlatMatchTheReference) {
  const Shape shape = GetParam();
  const int n = shape.nodes * shape.ranks;
  for (MoeAlgo algo : {MoeAlgo::kHier, MoeAlgo::kFlat}) {
    MoeOptions o = small(2 * n, std::min(3, 2 * n));
    o.algo = algo;
    run_combine(shape, o, "uniform");
    o = small(4 * n, std::min(8, 4 * n));  // topk above the PE count
    o.algo = algo;
    o.weighting = MoeWeighting::kNone;
    o.biases = 2;
    o.partial_dtype = DType::kF32;
    run_combine(shape, o, "skewed");
  }
}

INSTANTIATE_TEST_SUITE_P(Moe, MoeCombineShapes,
                         ::testing::Values(Shape{1, 1}, Shape{1, 3}, Shape{2, 1}, Shape{2, 2},
                                           Shape{3, 2}, Shape{2, 3}),
                         [](const auto& info) {
                           return std::to_string(info.param.nodes) + "x" +
                                  std::to_string(info.param.ranks);
                         });

TEST(MoeCombine, EmptyPeOneBiasOneChannelAndRingsOfOneChunk) {
  MoeOptions o = small(8, 3);
  o.biases = 1;
  run_combine({2, 2}, o, "uniform", /*empty_pe=*/2);
  o.channels = 1;
  o.chunk_tokens = 1;
  o.rdma_ring_tokens = 2;  // a channel's partials never all fit at once
  run_combine({2, 2}, o, "skewed");
  o.channels = 5;
  o.experts = 12;
  run_combine({3, 2}, o, "uniform");
}

TEST(MoeCombine, EveryExpertOnOnePeAndTheBenchmarkHidden) {
  MoeOptions o = small(16, 4);  // experts 0..3 all on PE 0: it gets every token, PEs 1..3 none
  run_combine({2, 2}, o, "pe0");
  o.algo = MoeAlgo::kFlat;
  run_combine({2, 2}, o, "pe0");
  o = small(64, 8);  // DeepEP's shape, scaled down in tokens
  o.hidden = 7168;
  o.tokens = 512;
  o.chunk_tokens = 4;
  o.rdma_ring_tokens = 16;
  run_combine({2, 2}, o, "uniform", -1, size_t(192) << 20);
}

TEST(MoeCombine, RepeatedRunsAreBitwiseEqual) {
  const MoeOptions o = small(8, 4);
  const Outcome first = run_combine({2, 2}, o, "uniform");
  const Outcome second = run_combine({2, 2}, o, "uniform");
  EXPECT_EQ(first.combined, second.combined);
}

TEST(MoeCombine, HierarchicalMovesAtMostHalfTheFlatInterNodeBytesAtTopk8) {
  MoeOptions o = small(32, 8);
  o.tokens = 200;
  o.algo = MoeAlgo::kHier;
  const int64_t hier = run_combine({2, 2}, o, "uniform").inter_node_bytes;
  o.algo = MoeAlgo::kFlat;
  const int64_t flat = run_combine({2, 2}, o, "uniform").inter_node_bytes;
  EXPECT_GT(hier, 0);
  EXPECT_LE(hier * 2, flat) << "hier " << hier << " flat " << flat;
}

// A handle that expects a record nobody sends (PE 0 told that one of its tokens comes back from
// node 1 too): PE 0's receiver waits on that ring until the deadline and fails naming the PE,
// channel, ring, head and tail, nothing traps, and the next combine on the cluster is right.
TEST(MoeCombine, AStuckRingFailsNamingPeChannelRingHeadAndTail) {
  LocalClusterOptions c;
  c.nodes = 2;
  c.ranks_per_node = 2;
  c.heap_size = size_t(2) * (24 << 20);
  c.wait_timeout = std::chrono::milliseconds(500);
  c.tcp.io_threads = 1;
  LocalCluster cluster(c);
  MoeOptions o = small(8, 1);
  o.channels = 1;
  std::string stuck;
  auto stuck_combine = [&](Pe& pe) {
    const Routing routing = routing_for(o, pe.my_pe(), "uniform");
    const std::vector<uint16_t> x = moe_tokens(o, pe.my_pe(), InputSpec{9, ""});
    DispatchResult dispatched = dispatch(pe, o, x, routing);
    if (pe.my_pe() == 0) {            // the first token not routed to node 1 now waits for it
      int64_t* from_node1 = nullptr;  // rdma_slot is [token][node]
      for (int64_t t = 0; t < routing.tokens && !from_node1; ++t) {
        int64_t& slot = dispatched.paths.rdma_slot[size_t(t) * 2 + 1];
        if (slot < 0) from_node1 = &slot;
      }
      ASSERT_NE(from_node1, nullptr) << "every token of PE 0 went to node 1: change the seed";
      *from_node1 = 0;
    }
    try {
      combine(pe, o, dispatched, routing, CombineInputs{});
      ADD_FAILURE() << "PE " << pe.my_pe() << ": the combine finished";
    } catch (const std::exception& e) {
      if (pe.my_pe() == 0) stuck = e.what();
      throw;
    }
  };
  EXPECT_THROW(cluster.run(stuck_combine), std::exception);
  for (const char* part : {"PE 0: combine: receiver, channel 0, RDMA ring from node 1: head ",
                           ", tail ", ", capacity 4, token "}) {
    EXPECT_NE(stuck.find(part), std::string::npos) << part << " not in: " << stuck;
  }
  // One expert a token: a single partial, rounded once like the reference, so exactly equal.
  cluster.run([&](Pe& pe) {
    const Routing routing = routing_for(o, pe.my_pe(), "uniform");
    const std::vector<uint16_t> x = moe_tokens(o, pe.my_pe(), InputSpec{9, ""});
    const CombineResult r = combine(pe, o, dispatch(pe, o, x, routing), routing, CombineInputs{});
    const std::vector<uint16_t> expected = reference_combine(o, routing, x, {});
    ASSERT_EQ(r.combined_x.size(), expected.size() * 2);
    EXPECT_EQ(std::memcmp(r.combined_x.data(), expected.data(), r.combined_x.size()), 0);
  });
}

// A handle whose row index lies past the rows a node peer lent (PEs combining different
// dispatches) fails the call naming the row and the PE, without reading outside them: on one
// node the receiver reads that row (its own node's partials), on two the forwarder (a record
// from the other node). The next combine matches the reference.
void expect_row_past_the_loan_refused(Shape shape) {
  LocalClusterOptions c;
  c.nodes = shape.nodes;
  c.ranks_per_node = shape.ranks;
  c.wait_timeout = std::chrono::seconds(60);
  c.tcp.io_threads = 1;
  LocalCluster cluster(c);
  const MoeOptions o = small(4 * shape.nodes, 2);
  std::string refused;
  EXPECT_THROW(cluster.run([&](Pe& pe) {
    const Routing routing = routing_for(o, pe.my_pe(), "uniform");
    const std::vector<uint16_t> x = moe_tokens(o, pe.my_pe(), InputSpec{9, ""});
    DispatchResult dispatched = dispatch(pe, o, x, routing);
    if (pe.my_pe() == 0) {  // a record from the last node that reached PE 1: a row it never had
      DispatchPaths& h = dispatched.paths;
      const int64_t* prefix = &h.forward_prefix[size_t(shape.nodes - 1) * (h.channels + 1)];
      bool changed = false;
      for (int64_t r = prefix[0]; r < prefix[h.channels] && !changed; ++r) {
        int64_t& slot = h.nvl_slot[size_t(r) * shape.ranks + 1];
        if (slot >= 0) slot = 1 << 20, changed = true;
      }
      ASSERT_TRUE(changed) << "no such token reached PE 1: change the seed";
    }
    try {
      combine(pe, o, dispatched, routing, CombineInputs{});
    } catch (const InvalidArgument& e) {
      refused = e.what();
      throw;
    }
  }),
               std::exception);
  EXPECT_NE(refused.find("combine: this PE's dispatch handle puts a token at row 1048576 of "
                         "local PE 1, whose expert rows hold "),
            std::string::npos)
      << refused;
  std::vector<int> matched(size_t(shape.nodes * shape.ranks), 0);
  cluster.run([&](Pe& pe) {  // the same cluster serves again
    const Routing routing = routing_for(o, pe.my_pe(), "uniform");
    const std::vector<uint16_t> x = moe_tokens(o, pe.my_pe(), InputSpec{9, ""});
    const CombineResult r = combine(pe, o, dispatch(pe, o, x, routing), routing, CombineInputs{});
    const std::vector<uint16_t> expected = reference_combine(o, routing, x, {});
    bool near = r.combined_x.size() == expected.size() * 2;
    for (size_t i = 0; near && i < expected.size(); ++i) {
      const float want = bf16_to_f32(expected[i]);
      near = std::fabs(load_one(r.combined_x.data(), i, DType::kBF16) - want) <=
             0.05f * std::max(1.0f, std::fabs(want));
    }
    matched[size_t(pe.my_pe())] = near;
  });
  EXPECT_EQ(matched, std::vector<int>(matched.size(), 1));
}

TEST(MoeCombine, ARowPastWhatANodePeerLentIsRefused) {
  expect_row_past_the_loan_refused({1, 2});  // the receiver's read
  expect_row_past_the_loan_refused({2, 2});  // the forwarder's read
}

}  // namespace
}  // namespace symmesh
