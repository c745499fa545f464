// Barriers: every algorithm on 1..9 nodes (the inter-node part runs among node leaders, so
// node counts are the team sizes that matter), with several ranks per node, thousands of
// back-to-back barriers, and strided sub-teams. The check is the barrier property itself:
// nobody leaves barrier i before everybody has arrived at it.
#include "runtime/barrier.h"

#include <gtest/gtest.h>

#include "runtime/enum_words.h"
#include "tests/support/local_cluster.h"

namespace symmesh {
namespace {

struct Case {
  BarrierAlgo algo;
  int nodes;
  int ranks;
  int iterations;
  int k = 8;
};

LocalClusterOptions options(const Case& c) {
  LocalClusterOptions o;
  o.nodes = c.nodes;
  o.ranks_per_node = c.ranks;
  o.heap_size = size_t(c.ranks) * (12 << 20);
  o.wait_timeout = std::chrono::seconds(60);
  o.tcp.connections_per_peer = 1;
  o.tcp.io_threads = 1;
  return o;
}

// Each PE adds one to a counter on PE 0 before barrier i; after it, the counter on PE 0
// must already hold (i + 1) x n_pes.
void check_barrier_property(Pe& pe, Team& team, const BarrierOptions& barrier_options,
                            int iterations) {
  auto* counter = pe.malloc_array<uint64_t>(1);
  *counter = 0;
  barrier(pe, team, barrier_options);
  const int root = team.pe(0);
  for (int i = 0; i < iterations; ++i) {
    pe.atomic_add(counter, 1, root);
    pe.quiet();
    barrier(pe, team, barrier_options);
    uint64_t seen = 0;
    pe.get(&seen, counter, sizeof(seen), root);
    ASSERT_GE(seen, uint64_t(i + 1) * team.size()) << "left barrier " << i << " early";
  }
  barrier(pe, team, barrier_options);
  pe.free(counter);
}

class Barrier : public ::testing::TestWithParam<Case> {};

TEST_P(Barrier, NobodyLeavesBeforeEverybodyArrived) {
  const Case c = GetParam();
  LocalCluster cluster(options(c));
  cluster.run([&](Pe& pe) {
    check_barrier_property(pe, pe.team_world(), BarrierOptions{c.algo, c.k}, c.iterations);
  });
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (auto algo :
       {BarrierAlgo::kDissemination, BarrierAlgo::kKary, BarrierAlgo::kPull, BarrierAlgo::kAuto}) {
    for (int nodes = 1; nodes <= 9; ++nodes) all.push_back(Case{algo, nodes, 1, 40});
    all.push_back(Case{algo, 3, 3, 40});
  }
  all.push_back(Case{BarrierAlgo::kKary, 9, 1, 40, 2});
  all.push_back(Case{BarrierAlgo::kKary, 7, 1, 40, 3});
  return all;
}

INSTANTIATE_TEST_SUITE_P(AlgorithmsAndSizes, Barrier, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           return wire::word(info.param.algo) + "_k" +
                                  std::to_string(info.param.k) + "_" +
                                  std::to_string(info.param.nodes) + "x" +
                                  std::to_string(info.param.ranks);
                         });

TEST(BarrierStress, ThousandsBackToBackWithoutAHang) {
  LocalCluster cluster(options(Case{BarrierAlgo::kPull, 3, 2, 0}));
  cluster.run([](Pe& pe) {
    for (auto algo : {BarrierAlgo::kDissemination, BarrierAlgo::kKary, BarrierAlgo::kPull,
                      BarrierAlgo::kAuto}) {
      for (int i = 0; i < 1500; ++i) barrier_all(pe, BarrierOptions{algo, 2});
      // After the back-to-back run the barrier still holds everybody back.
      check_barrier_property(pe, pe.team_world(), BarrierOptions{algo, 2}, 3);
    }
    // Switching algorithms from one barrier to the next is allowed too.
    for (int i = 0; i < 1500; ++i) barrier_all(pe, BarrierOptions{BarrierAlgo(i % 4), 3});
    check_barrier_property(pe, pe.team_world(), BarrierOptions{BarrierAlgo::kKary, 3}, 3);
  });
}

TEST(BarrierTeams, StridedSubTeamsSynchroniseOnlyTheirMembers) {
  LocalCluster cluster(options(Case{BarrierAlgo::kPull, 3, 3, 0}));
  cluster.run([](Pe& pe) {
    // Every other PE of the world: 0, 2, 4, 6, 8 (several per node, not contiguous).
    auto evens = pe.team_split_strided(pe.team_world(), 0, 2, 5, "evens");
    EXPECT_EQ(evens != nullptr, pe.my_pe() % 2 == 0);
    if (evens) {
      EXPECT_EQ(evens->size(), 5);
      EXPECT_EQ(evens->my_index(), pe.my_pe() / 2);
      for (auto algo : {BarrierAlgo::kDissemination, BarrierAlgo::kKary, BarrierAlgo::kPull,
                        BarrierAlgo::kAuto}) {
        check_barrier_property(pe, *evens, BarrierOptions{algo, 2}, 30);
      }
      pe.team_destroy(*evens);
    }
    barrier_all(pe);
    // The freed index is reused by the next split, with fresh counters above the old ones.
    auto firsts = pe.team_split_strided(pe.team_world(), 0, 3, 3, "firsts");
    if (firsts) {
      check_barrier_property(pe, *firsts, BarrierOptions{}, 30);
      pe.team_destroy(*firsts);
    }
    barrier_all(pe);
  });
}

TEST(BarrierTeams, InvalidSplitNamesTheField) {
  LocalCluster cluster(options(Case{BarrierAlgo::kPull, 1, 4, 0}));
  cluster.run([](Pe& pe) {
    try {
      pe.team_split_strided(pe.team_world(), 1, 2, 3);
      FAIL();
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("stride 2"), std::string::npos) << e.what();
    }
    EXPECT_THROW(barrier(pe, pe.team_world(), BarrierOptions{BarrierAlgo::kKary, 40}),
                 InvalidArgument);
  });
}

}  // namespace
}  // namespace symmesh
