// MoE dispatch, hierarchical: every PE's received tokens (bits, order, expert ids, weights,
// sources) against the reference on 1 to 3 nodes x 1 to 3 ranks, uniform and skewed routing,
// topk above the PE count, a PE with no tokens, one channel and many, rings of one chunk; each
// dispatched in the storage of an earlier one of another routing. Rows placed by the caller,
// and a caller that fails to place them.
#include "ops/moe/dispatch.h"

#include <cstring>

#include <gtest/gtest.h>

#include <mutex>

#include "api/op_limits.h"
#include "common/errors.h"
#include "common/streaming_copy.h"
#include "jobs/moe/reference.h"
#include "ops/moe/record_counts.h"
#include "tests/support/local_cluster.h"

namespace symmesh {
namespace {

struct Shape {
  int nodes;
  int ranks;
};

LocalClusterOptions cluster_options(Shape shape, size_t heap_per_rank = 24 << 20) {
  return op_test_options(shape.nodes, shape.ranks, heap_per_rank);
}

// PE `pe`'s options: the job's, with `empty_pe` holding no tokens.
MoeOptions pe_options(MoeOptions o, int pe, int empty_pe) {
  if (pe == empty_pe) o.tokens = 0;
  return o;
}

void expect_dispatch(Shape shape, const MoeOptions& o, const std::string& routing_name,
                     int empty_pe = -1, size_t heap_per_rank = 24 << 20) {
  LocalCluster cluster(cluster_options(shape, heap_per_rank));
  const ClusterShape cs{shape.nodes, shape.ranks};
  const int n = cs.n_pes();
  std::vector<Routing> routings;
  std::vector<std::vector<uint16_t>> tokens;
  for (int pe = 0; pe < n; ++pe) {
    const MoeOptions mine = pe_options(o, pe, empty_pe);
    routings.push_back(make_routing(mine, pe, parse_routing(routing_name, 3)));
    tokens.push_back(moe_tokens(mine, pe, InputSpec{3, ""}));
  }
  std::vector<DispatchResult> results(n);
  cluster.run([&](Pe& pe) {
    // First another routing, whose result lends its storage to the one checked.
    const int me = pe.my_pe();
    const MoeOptions mine = pe_options(o, me, empty_pe);
    const Routing other = make_routing(mine, me, parse_routing("uniform", 11));
    DispatchResult earlier = dispatch(pe, o, moe_tokens(mine, me, InputSpec{11, ""}), other);
    results[me] = dispatch(pe, o, tokens[me], routings[me], std::move(earlier));
  });
  const std::string what =
      routing_name + " on " + std::to_string(shape.nodes) + "x" + std::to_string(shape.ranks);
  for (int pe = 0; pe < n; ++pe) {
    const DispatchResult& r = results[pe];
    const auto expected = reference_dispatch(o, routings, cs, pe);
    ASSERT_EQ(r.received, int64_t(expected.size())) << what << " PE " << pe;
    EXPECT_EQ(r.paths.recv_prefix.back(), r.received);
    for (int64_t i = 0; i < r.received; ++i) {
      const ReceivedToken& want = expected[i];
      ASSERT_EQ(r.sources[i].source_pe, want.source_pe) << what << " PE " << pe << " #" << i;
      ASSERT_EQ(r.sources[i].source_token, want.source_token) << what << " PE " << pe << " #" << i;
      const uint16_t* sent = &tokens[want.source_pe][size_t(want.source_token) * o.hidden];
      ASSERT_EQ(std::memcmp(sent, &r.x[size_t(i) * o.hidden * 2], size_t(o.hidden) * 2), 0) << what;
      const Routing& source = routings[want.source_pe];
      bool mine = false;
      for (int k = 0; k < o.topk; ++k) {
        const int32_t expert = source.expert(want.source_token, k);
        const bool here = expert >= 0 && expert_pe(o, n, expert) == pe;
        mine = mine || here;
        EXPECT_EQ(r.topk_idx[size_t(i) * o.topk + k], here ? expert : -1) << what;
        EXPECT_EQ(r.topk_weights[size_t(i) * o.topk + k], source.weight(want.source_token, k));
      }
      EXPECT_TRUE(mine) << what << ": PE " << pe << " got a token for none of its experts";
    }
  }
}

MoeOptions small(int experts, int topk) {
  MoeOptions o;
  o.tokens = 37;
  o.hidden = 24;
  o.topk = topk;
  o.experts = experts;
  o.channels = 2;
  o.chunk_tokens = 3;
  return o;
}

class MoeDispatchShapes : public ::testing::TestWithParam<Shape> {};

TEST_P(MoeDispatchShapes, EveryPeReceivesItsTokensInOrder) {
  const Shape shape = GetParam();
  const int n = shape.nodes * shape.ranks;
  expect_dispatch(shape, small(2 * n, std::min(3, 2 * n)), "uniform");
  expect_dispatch(shape, small(4 * n, std::min(8, 4 * n)), "skewed");  // topk above the PE count
}

INSTANTIATE_TEST_SUITE_P(Moe, MoeDispatchShapes,
                         ::testing::Values(Shape{1, 1}, Shape{1, 3}, Shape{2, 1}, Shape{2, 2},
                                           Shape{3, 2}, Shape{2, 3}),
                         [](const auto& info) {
                           return std::to_string(info.param.nodes) + "x" +
                                  std::to_string(info.param.ranks);
                         });

TEST(MoeDispatch, EmptyPeOneChannelManyChannelsAndOneChunkRings) {
  MoeOptions o = small(8, 2);
  expect_dispatch({2, 2}, o, "uniform", /*empty_pe=*/1);
  o.channels = 1;
  expect_dispatch({2, 2}, o, "skewed");
  o.channels = 7;
  o.chunk_tokens = 1;
  o.rdma_ring_tokens = 2;
  expect_dispatch({2, 2}, o, "uniform");
}

// Everything but x: the received tokens' routing and sources, and the handle combine walks.
bool same_but_x(const DispatchResult& a, const DispatchResult& b) {
  bool sources = a.sources.size() == b.sources.size();
  for (size_t i = 0; sources && i < a.sources.size(); ++i) {
    sources = a.sources[i].source_pe == b.sources[i].source_pe &&
              a.sources[i].source_token == b.sources[i].source_token;
  }
  const DispatchPaths &g = a.paths, &h = b.paths;
  return sources && a.received == b.received && a.topk_idx == b.topk_idx &&
         a.topk_weights == b.topk_weights && g.channels == h.channels &&
         g.recv_prefix == h.recv_prefix && g.rdma_slot == h.rdma_slot &&
         g.forward_prefix == h.forward_prefix && g.nvl_slot == h.nvl_slot;
}

// Rows that add up to more than a CPU's share of the cache go with non-temporal stores
// (common/streaming_copy.h). A dispatch sized from that threshold takes that path, both for
// its own node's rows and for the rows it forwards from the other node, and every row still
// arrives bit for bit.
TEST(MoeDispatch, RowsPastTheCacheShareArriveBitForBit) {
  MoeOptions o;
  o.hidden = 8192;  // 16 KiB bf16 rows
  o.topk = 8;
  o.experts = 16;
  o.channels = 2;
  o.chunk_tokens = 16;
  const size_t row = size_t(o.hidden) * 2;
  // Nearly every token of the 4 PEs reaches each PE (8 of 16 experts, 4 a PE).
  o.tokens = int64_t(streaming_threshold() / row / 4) * 3 / 2 + 8;
  if (o.tokens > 4096) GTEST_SKIP() << "the cache share needs too many tokens";
  const ClusterShape cs{2, 2};
  std::vector<Routing> routings;
  for (int pe = 0; pe < cs.n_pes(); ++pe) {
    routings.push_back(make_routing(o, pe, parse_routing("uniform", 3)));
  }
  for (int pe = 0; pe < cs.n_pes(); ++pe) {
    ASSERT_GE(reference_dispatch(o, routings, cs, pe).size() * row, streaming_threshold())
        << "the shape must take the streaming path on PE " << pe;
  }
  expect_dispatch({2, 2}, o, "uniform", -1, size_t(o.tokens) * row + (32 << 20));
}

TEST(MoeDispatch, AnEarlierResultsStorageIsReused) {
  LocalCluster cluster(cluster_options({2, 2}));
  const MoeOptions o = small(8, 2);
  std::vector<int> reused(4, 0);
  cluster.run([&](Pe& pe) {
    const Routing routing = make_routing(o, pe.my_pe(), parse_routing("uniform", 2));
    const std::vector<uint16_t> x = moe_tokens(o, pe.my_pe(), InputSpec{2, ""});
    DispatchResult first = dispatch(pe, o, x, routing);
    const std::byte* storage = first.x.data();
    const DispatchResult fresh = dispatch(pe, o, x, routing);
    const DispatchResult second = dispatch(pe, o, x, routing, std::move(first));
    reused[pe.my_pe()] =
        second.x.data() == storage && second.x == fresh.x && same_but_x(second, fresh);
  });
  EXPECT_EQ(reused, std::vector<int>(4, 1));
}

TEST(MoeDispatch, RowsGoWhereTheCallerPlacesThem) {
  LocalCluster cluster(cluster_options({2, 2}));
  const MoeOptions o = small(8, 2);
  std::vector<int> same(4, 0);
  cluster.run([&](Pe& pe) {
    const Routing routing = make_routing(o, pe.my_pe(), parse_routing("skewed", 4));
    const std::vector<uint16_t> x = moe_tokens(o, pe.my_pe(), InputSpec{4, ""});
    const DispatchResult own = dispatch(pe, o, x, routing);
    std::vector<std::byte> placed;
    const DispatchResult r = dispatch(pe, o, x.data(), routing, {}, [&](int64_t received) {
      placed.resize(size_t(received) * o.hidden * 2);
      return placed.data();
    });
    same[pe.my_pe()] = r.x.empty() && placed == own.x && same_but_x(r, own);
  });
  EXPECT_EQ(same, std::vector<int>(4, 1));
}

// A caller that cannot place the rows (its staging area is full, say) gets its error once its
// part of the collective is done: no PE waits for it, no region is lost, the next call works.
TEST(MoeDispatch, AFailedPlacementEndsTheCallCleanly) {
  LocalCluster cluster(cluster_options({2, 2}));
  const MoeOptions o = small(8, 2);
  std::vector<std::string> errors(4);
  std::vector<int> again(4, 0);
  cluster.run([&](Pe& pe) {
    const int me = pe.my_pe();
    const Routing routing = make_routing(o, me, parse_routing("uniform", 6));
    const std::vector<uint16_t> x = moe_tokens(o, me, InputSpec{6, ""});
    HeapAllocator& heap = pe.node().allocator(pe.local_rank());
    const size_t used_before = heap.used();
    std::vector<std::byte> placed;
    try {
      dispatch(pe, o, x.data(), routing, {}, [&](int64_t received) {
        if (me == 2) throw InvalidArgument("no room for the received rows");
        placed.resize(size_t(received) * o.hidden * 2);
        return placed.data();
      });
    } catch (const InvalidArgument& e) {
      errors[me] = e.what();
    }
    const DispatchResult r = dispatch(pe, o, x, routing);
    again[me] = r.received > 0 && heap.used() == used_before;
  });
  EXPECT_EQ(errors, (std::vector<std::string>{"", "", "no room for the received rows", ""}));
  EXPECT_EQ(again, std::vector<int>(4, 1));
}

TEST(MoeDispatch, InputsOfTheWrongSizeAreRefused) {
  LocalCluster cluster(cluster_options({1, 2}));
  const MoeOptions o = small(4, 2);
  std::string message;
  std::mutex mutex;
  cluster.run([&](Pe& pe) {
    const Routing routing = make_routing(o, pe.my_pe(), parse_routing("uniform", 1));
    try {
      dispatch(pe, o, std::vector<uint16_t>(5), routing);
    } catch (const InvalidArgument& e) {
      std::lock_guard lock(mutex);
      message = e.what();
    }
  });
  EXPECT_NE(message.find("token values"), std::string::npos) << message;
}

// The counts a PE reads from its shared heap: each is at most a PE's tokens, and so is each
// run of a channel's counts from one PE; an attached process that scribbled them (each count
// allowed, their sum not, or a count that would wrap the sum) is named before they size
// anything.
TEST(MoeDispatch, RecordCountsFromTheSharedHeapAreCheckedPerSourceOverItsChannels) {
  const uint64_t most = uint64_t(kMaxMoeTokens);
  const std::vector<uint64_t> fine = {most / 2, most / 2, most, 0};
  EXPECT_EQ(checked_counts(fine.data(), fine.size(), 2, "counts"), fine);
  for (const std::vector<uint64_t>& scribbled :
       {std::vector<uint64_t>{1, 1, most, 1}, std::vector<uint64_t>{most + 1, 0, 0, 0},
        std::vector<uint64_t>{0, 0, UINT64_MAX, 2}}) {
    try {
      checked_counts(scribbled.data(), scribbled.size(), 2, "dispatch notify");
      ADD_FAILURE() << "accepted counts adding up past " << most;
    } catch (const PeerError& e) {
      EXPECT_NE(std::string(e.what()).find("dispatch notify: counts "), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("add up to more than a PE sends"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace symmesh
