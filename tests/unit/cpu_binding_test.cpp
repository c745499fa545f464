// Where a node's PE threads are bound, and that the threads a bound PE starts are not.
#include "common/cpu_binding.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <thread>

namespace symmesh {
namespace {

cpu_set_t this_thread_mask() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  EXPECT_EQ(pthread_getaffinity_np(pthread_self(), sizeof(mask), &mask), 0);
  return mask;
}

cpu_set_t mask_of_a_new_thread() {
  cpu_set_t mask;
  std::thread([&] { mask = this_thread_mask(); }).join();
  return mask;
}

TEST(CpuPlacement, PesTakeTheAllowedCpusInTurnAcrossTheNodesOfAHost) {
  const CpuPlacement node0({0, 1}, 0, 2), node1({0, 1}, 1, 2);
  EXPECT_EQ(node0.cpus_of(0), std::vector<int>{0});
  EXPECT_EQ(node0.cpus_of(1), std::vector<int>{1});
  EXPECT_EQ(node1.cpus_of(0), std::vector<int>{0});
  EXPECT_EQ(node1.cpus_of(1), std::vector<int>{1});
  // One PE per daemon: two daemons on one host do not share a CPU.
  EXPECT_EQ(CpuPlacement({0, 1}, 0, 1).cpus_of(0), std::vector<int>{0});
  EXPECT_EQ(CpuPlacement({0, 1}, 1, 1).cpus_of(0), std::vector<int>{1});
  // The CPUs are the allowed ones, not 0..n-1.
  const CpuPlacement sparse({2, 5, 7}, 1, 2);
  EXPECT_EQ(sparse.cpus_of(0), std::vector<int>{7});
  EXPECT_EQ(sparse.cpus_of(1), std::vector<int>{2});
  EXPECT_EQ(sparse.cpus_of(2), std::vector<int>{});
  EXPECT_EQ(sparse.describe(), "PEs bound to CPUs 7,2 (of 3 CPUs allowed)");
}

TEST(CpuPlacement, MorePesThanCpusOrNoMaskLeaveEveryPeUnbound) {
  const CpuPlacement crowded({0, 1}, 0, 3);
  for (int local = 0; local < 3; ++local) EXPECT_EQ(crowded.cpus_of(local), std::vector<int>{});
  EXPECT_NE(crowded.describe().find("more PEs than the 2 CPUs allowed"), std::string::npos);
  EXPECT_EQ(CpuPlacement({}, 0, 1).cpus_of(0), std::vector<int>{});
  EXPECT_EQ(CpuPlacement().cpus_of(0), std::vector<int>{});
  EXPECT_EQ(CpuPlacement({}, 0, 1).describe(),
            "PEs not bound to CPUs (the CPUs allowed are not known)");
}

TEST(CpuBinding, ABoundThreadRunsOnOneCpuAndStartsItsHelpersOnAllOfItsOldOnes) {
  const std::vector<int> allowed = allowed_cpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs to tell one CPU from all";
  std::thread([&] {
    const cpu_set_t before = this_thread_mask();
    {
      const ScopedCpuBinding bound(allowed.back());
      ASSERT_TRUE(bound.bound());
      cpu_set_t mask = this_thread_mask();
      EXPECT_EQ(CPU_COUNT(&mask), 1);
      EXPECT_TRUE(CPU_ISSET(allowed.back(), &mask));
      {
        const ScopedUnbound anywhere;
        const cpu_set_t helper = mask_of_a_new_thread();
        EXPECT_TRUE(CPU_EQUAL(&helper, &before));
      }
      mask = this_thread_mask();  // bound again once the helpers are started
      EXPECT_EQ(CPU_COUNT(&mask), 1);
      const cpu_set_t inherited = mask_of_a_new_thread();
      EXPECT_EQ(CPU_COUNT(&inherited), 1);
    }
    const cpu_set_t after = this_thread_mask();
    EXPECT_TRUE(CPU_EQUAL(&after, &before));
  }).join();
}

TEST(CpuBinding, ANestedBindingLeavesHelpersTheOutermostMask) {
  const std::vector<int> allowed = allowed_cpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs to tell one CPU from all";
  std::thread([&] {
    const cpu_set_t before = this_thread_mask();
    const ScopedCpuBinding outer(allowed[0]);
    {
      const ScopedCpuBinding inner(allowed[1]);
      ASSERT_TRUE(inner.bound());
      const ScopedUnbound anywhere;
      const cpu_set_t helper = mask_of_a_new_thread();
      EXPECT_TRUE(CPU_EQUAL(&helper, &before));
    }
    cpu_set_t mask = this_thread_mask();  // the outer binding again
    EXPECT_EQ(CPU_COUNT(&mask), 1);
    EXPECT_TRUE(CPU_ISSET(allowed[0], &mask));
    const ScopedUnbound anywhere;
    const cpu_set_t helper = mask_of_a_new_thread();
    EXPECT_TRUE(CPU_EQUAL(&helper, &before));
  }).join();
}

TEST(CpuBinding, ACpuOutsideTheMaskBindsNothing) {
  const std::vector<int> allowed = allowed_cpus();
  int outside = 0;
  while (outside < CPU_SETSIZE &&
         std::find(allowed.begin(), allowed.end(), outside) != allowed.end()) {
    ++outside;
  }
  const cpu_set_t before = this_thread_mask();
  for (const int cpu : {outside, int(CPU_SETSIZE), -1}) {
    const ScopedCpuBinding refused(cpu);
    EXPECT_FALSE(refused.bound()) << "CPU " << cpu;
    const ScopedUnbound anywhere;
    const cpu_set_t during = this_thread_mask();
    EXPECT_TRUE(CPU_EQUAL(&during, &before)) << "CPU " << cpu;
  }
}

TEST(CpuBinding, NoCpuBindsNothingAndAnUnboundThreadStaysAsItWas) {
  const cpu_set_t before = this_thread_mask();
  {
    const ScopedCpuBinding unbound(std::nullopt);
    const ScopedUnbound anywhere;
    const cpu_set_t during = this_thread_mask();
    EXPECT_TRUE(CPU_EQUAL(&during, &before));
  }
  const cpu_set_t after = this_thread_mask();
  EXPECT_TRUE(CPU_EQUAL(&after, &before));
}

}  // namespace
}  // namespace symmesh
