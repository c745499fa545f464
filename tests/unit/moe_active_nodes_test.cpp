// MoE dispatch and combine that leave a node out (options.active_nodes): the PEs of the node left
// out do not call, and the others' calls complete with the tokens and sums the reference gives
// for the routing without that node's experts; the next call with every node in works again.
// A token routed to a node left out, a PE of such a node that calls, and masks that cannot run
// are refused, naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/errors.h"
#include "jobs/moe/reference.h"
#include "ops/moe/combine.h"
#include "ops/moe/dispatch.h"
#include "runtime/barrier.h"
#include "tests/support/local_cluster.h"

namespace symmesh {
namespace {

LocalClusterOptions cluster_options(int nodes, int ranks) {
  return op_test_options(nodes, ranks, 24 << 20);
}

MoeOptions small(int n_pes) {
  MoeOptions o;
  o.tokens = 29;
  o.hidden = 32;
  o.experts = 4 * n_pes;
  o.topk = std::min(6, o.experts);
  o.channels = 2;
  o.chunk_tokens = 2;
  o.rdma_ring_tokens = 4;
  o.biases = 1;
  return o;
}

// One call: the nodes taking part and every PE's routing for it (the others' send nothing).
struct Call {
  uint64_t active;
  std::vector<Routing> routings;
};

Call call_on(const MoeOptions& o, const ClusterShape& shape, uint64_t active, int seed) {
  Call call{active, {}};
  for (int pe = 0; pe < shape.n_pes(); ++pe) {
    MoeOptions mine = o;
    mine.active_nodes = active;
    if (!(active >> (pe / shape.ranks_per_node) & 1)) mine.tokens = 0;
    call.routings.push_back(make_routing(mine, pe, parse_routing("skewed", seed)));
    leave_out_nodes(call.routings.back(), mine, shape);
  }
  return call;
}

// This PE's part of `call` when its node takes part: dispatch and combine, each checked against
// the reference.
void take_part(Pe& pe, MoeOptions o, const ClusterShape& shape, const Call& call) {
  if (!(call.active >> pe.my_node() & 1)) return;
  o.active_nodes = call.active;
  const int me = pe.my_pe();
  const std::string what =
      "active nodes " + std::to_string(call.active) + ", PE " + std::to_string(me);
  const std::vector<uint16_t> x = moe_tokens(o, me, InputSpec{5, ""});
  const std::vector<std::vector<uint16_t>> biases{moe_bias(o, me, 0, InputSpec{5, ""})};
  const DispatchResult d = dispatch(pe, o, x, call.routings[me]);
  const auto expected = reference_dispatch(o, call.routings, shape, me);
  ASSERT_EQ(d.received, int64_t(expected.size())) << what;
  for (int64_t i = 0; i < d.received; ++i) {
    ASSERT_EQ(d.sources[i].source_pe, expected[i].source_pe) << what;
    ASSERT_EQ(d.sources[i].source_token, expected[i].source_token) << what;
  }
  const CombineResult c = combine(pe, o, d, call.routings[me], biases);
  const std::vector<uint16_t> want = reference_combine(o, call.routings[me], x, biases);
  ASSERT_EQ(c.combined_x.size(), want.size() * 2) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const float w = bf16_to_f32(want[i]);
    ASSERT_NEAR(load_one(c.combined_x.data(), i, DType::kBF16), w,
                0.05f * std::max(1.0f, std::fabs(w)))
        << what << " element " << i;
  }
}

struct Shape {
  int nodes;
  int ranks;
};

class MoeActiveNodes : public ::testing::TestWithParam<Shape> {};

// In one job, so that each call meets the slots the calls before it left: every node, node 1
// left out twice (and on 3 nodes: nodes 0 and 1, node 2, then node 0), then every node again.
TEST_P(MoeActiveNodes, TheOthersServeWithoutANodeAndItComesBackAfter) {
  const Shape s = GetParam();
  LocalCluster cluster(cluster_options(s.nodes, s.ranks));
  const ClusterShape shape{s.nodes, s.ranks};
  const MoeOptions o = small(shape.n_pes());
  const uint64_t every = (uint64_t{1} << s.nodes) - 1;
  const uint64_t without_1 = every & ~uint64_t{2};
  std::vector<Call> calls{call_on(o, shape, every, 1), call_on(o, shape, without_1, 2),
                          call_on(o, shape, without_1, 3)};
  if (s.nodes > 2) {
    calls.push_back(call_on(o, shape, without_1 & ~uint64_t{1}, 4));  // node 2 alone
    // Node 2 out, then straight to node 0 out: node 2 joins a team of nodes after node 1 made
    // teams it was not in.
    calls.push_back(call_on(o, shape, 0b011, 5));
    calls.push_back(call_on(o, shape, 0b110, 6));
  }
  calls.push_back(call_on(o, shape, every, 7));
  cluster.run([&](Pe& pe) {
    for (const Call& call : calls) {
      take_part(pe, o, shape, call);
      if (::testing::Test::HasFatalFailure()) return;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Moe, MoeActiveNodes,
                         ::testing::Values(Shape{2, 2}, Shape{3, 1}, Shape{3, 2}),
                         [](const auto& info) {
                           return std::to_string(info.param.nodes) + "x" +
                                  std::to_string(info.param.ranks);
                         });

TEST(MoeActiveNodes, OnePeOnATeamOfItsNodesBarriersWithTheOthersOfIt) {
  LocalCluster cluster(cluster_options(3, 2));
  cluster.run([&](Pe& pe) {
    if (pe.my_node() == 1) return;
    for (int call = 0; call < 3; ++call) {
      const std::unique_ptr<Team> team = pe.team_of_nodes(0b101);
      ASSERT_EQ(team->size(), 4);
      EXPECT_EQ(team->members(), (std::vector<int>{0, 1, 4, 5}));
      barrier(pe, *team);
      EXPECT_EQ(pe.exchange(*team, uint64_t(pe.my_pe())), (std::vector<uint64_t>{0, 1, 4, 5}));
    }
  });
}

TEST(MoeActiveNodes, MasksThatCannotRunAreRefusedNamingWhy) {
  LocalCluster cluster(cluster_options(2, 1));
  const ClusterShape shape{2, 1};
  MoeOptions o = small(2);
  auto refused = [&](const MoeOptions& options, const std::string& needle) {
    try {
      validate(options, 2, 1);
      FAIL() << "accepted; wanted " << needle;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  o.active_nodes = 0b100;
  refused(o, "past the cluster's 2");
  o.active_nodes = 0b01;
  o.algo = MoeAlgo::kLowLatency;
  o.biases = 0;
  refused(o, "not available with --algo low-latency: allowed hier");

  // A token routed to node 1, which the call leaves out.
  o = small(2);
  o.active_nodes = 0b01;
  try {
    cluster.run([&](Pe& pe) {
      if (pe.my_node() == 1) return;
      const Routing routing = make_routing(o, 0, parse_routing("uniform", 3));
      dispatch(pe, o, moe_tokens(o, 0, InputSpec{3, ""}), routing);
    });
    FAIL() << "a token routed to a node left out was dispatched";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("on node 1, which the active nodes leave out"),
              std::string::npos)
        << e.what();
  }
  // A PE of the node left out that calls.
  try {
    cluster.run([&](Pe& pe) {
      if (pe.my_node() == 0) return;
      Routing routing = make_routing(o, 1, parse_routing("uniform", 3));
      leave_out_nodes(routing, o, shape);
      dispatch(pe, o, moe_tokens(o, 1, InputSpec{3, ""}), routing);
    });
    FAIL() << "a PE of a node left out took part";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("PE 1 is on node 1, which the active nodes leave out"),
              std::string::npos)
        << e.what();
  }
  // The cluster serves every node after both.
  const Call every = call_on(small(2), shape, 0b11, 6);
  cluster.run([&](Pe& pe) { take_part(pe, small(2), shape, every); });
}

}  // namespace
}  // namespace symmesh
