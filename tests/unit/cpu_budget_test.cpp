// The CPUs a daemon sizes jobs for, read from a made-up machine (a directory standing for /):
// the cgroup v2 and v1 quotas (the tightest of a cgroup and its ancestors), the NUMA nodes
// restricted to the affinity mask, --cpus within the mask; the default split of a fused
// operator's threads; and PEs placed on NUMA nodes, their helpers staying there.
#include "common/cpu_budget.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/cpu_binding.h"
#include "common/errors.h"

namespace symmesh {
namespace {

class FakeMachine {
 public:
  FakeMachine() {
    char pattern[] = "/tmp/symmesh-cpus-XXXXXX";
    root_ = mkdtemp(pattern);
  }
  ~FakeMachine() { std::filesystem::remove_all(root_); }
  void write(const std::string& path, const std::string& text) const {
    std::filesystem::create_directories(std::filesystem::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

TEST(CpuBudget, CpuListsParseBothWaysAndBadOnesAreNamed) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11\n", "cpulist"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("", "cpulist"), std::vector<int>{});
  EXPECT_EQ(cpu_list_text({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(cpu_list_text({5}), "5");
  for (const char* bad : {"a", "3-1", "1,,2", "-1", "2-x"}) {
    try {
      parse_cpu_list(bad, "node0 cpulist");
      ADD_FAILURE() << bad << " was read as a CPU list";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("node0 cpulist: '"), std::string::npos) << e.what();
    }
  }
}

TEST(CpuBudget, TheTightestCgroupV2QuotaUpTheTreeCapsTheMask) {
  FakeMachine machine;
  machine.write("/proc/self/cgroup", "0::/jobs/daemon\n");
  machine.write("/sys/fs/cgroup/jobs/cpu.max", "250000 100000\n");  // 2.5 CPUs
  machine.write("/sys/fs/cgroup/jobs/daemon/cpu.max", "max 100000\n");
  machine.write("/sys/fs/cgroup/cpu.max", "800000 100000\n");
  const CpuBudget budget = read_cpu_budget({0, 1, 2, 3, 4, 5, 6, 7}, 0, machine.root());
  EXPECT_DOUBLE_EQ(budget.quota, 2.5);
  EXPECT_EQ(budget.usable, 2);
  EXPECT_EQ(budget.describe(), "2 CPUs (affinity 0-7, cgroup quota 2.5, 1 NUMA node)");
}

TEST(CpuBudget, ACgroupV1QuotaCountsWhereThereIsNoV2One) {
  FakeMachine machine;
  machine.write("/proc/self/cgroup", "4:cpu,cpuacct:/slurm/job1\n1:name=systemd:/x\n");
  machine.write("/sys/fs/cgroup/cpu,cpuacct/slurm/job1/cpu.cfs_quota_us", "400000\n");
  machine.write("/sys/fs/cgroup/cpu,cpuacct/slurm/job1/cpu.cfs_period_us", "100000\n");
  EXPECT_EQ(read_cpu_budget({0, 1, 2, 3, 4, 5, 6, 7}, 0, machine.root()).usable, 4);
  machine.write("/sys/fs/cgroup/cpu,cpuacct/slurm/job1/cpu.cfs_quota_us", "-1\n");  // none
  EXPECT_EQ(read_cpu_budget({0, 1, 2, 3, 4, 5, 6, 7}, 0, machine.root()).usable, 8);
}

TEST(CpuBudget, NumaNodesHoldOnlyTheMasksCpusAndNoNodeIsOne) {
  FakeMachine machine;
  machine.write("/sys/devices/system/node/node0/cpulist", "0-3,8-11\n");
  machine.write("/sys/devices/system/node/node1/cpulist", "4-7,12-15\n");
  machine.write("/sys/devices/system/node/node2/cpulist", "16-19\n");  // none of the mask's
  machine.write("/sys/devices/system/node/online", "0-2\n");           // not a node
  const CpuBudget budget = read_cpu_budget({2, 3, 4, 5, 8}, 0, machine.root());
  ASSERT_EQ(budget.numa.size(), 2u);
  EXPECT_EQ(budget.numa[0], (std::vector<int>{2, 3, 8}));
  EXPECT_EQ(budget.numa[1], (std::vector<int>{4, 5}));
  EXPECT_EQ(budget.usable, 5);

  FakeMachine bare;
  const CpuBudget one = read_cpu_budget({0, 1}, 0, bare.root());
  ASSERT_EQ(one.numa.size(), 1u);
  EXPECT_EQ(one.numa[0], (std::vector<int>{0, 1}));
}

TEST(CpuBudget, TheCpusFlagWinsAndPastTheMaskItSaysTheThreadsShareIt) {
  FakeMachine machine;
  const CpuBudget budget = read_cpu_budget({0, 1, 2, 3}, 3, machine.root());
  EXPECT_EQ(budget.usable, 3);
  EXPECT_TRUE(budget.from_flag);
  EXPECT_FALSE(budget.oversubscribed());
  EXPECT_EQ(budget.describe(), "3 CPUs (--cpus; affinity 0-3, no cgroup quota, 1 NUMA node)");
  const CpuBudget past = read_cpu_budget({0, 1, 2, 3}, 6, machine.root());
  EXPECT_EQ(past.usable, 6);
  EXPECT_TRUE(past.oversubscribed());
  EXPECT_NE(past.describe().find("more than the 4 CPUs it may run on: its jobs' threads share"),
            std::string::npos)
      << past.describe();
}

TEST(CpuBudget, FusedThreadsSplitTheNodesCpusOverItsPes) {
  // The 2-core machine keeps today's one of each; a 16-core host's 2 PEs get 7 + 1.
  for (auto [usable, ranks, compute, comm] : {std::tuple{2, 2, 1, 1},
                                              {2, 1, 1, 1},
                                              {1, 4, 1, 1},
                                              {16, 2, 7, 1},
                                              {16, 1, 14, 2},
                                              {64, 4, 14, 2},
                                              {4096, 1, 64, 64}}) {
    const FusedThreads threads = default_fused_threads(usable, ranks);
    EXPECT_EQ(threads.compute, compute) << usable << " CPUs, " << ranks << " PEs";
    EXPECT_EQ(threads.comm, comm) << usable << " CPUs, " << ranks << " PEs";
  }
}

TEST(CpuPlacement, PesOfADaemonTakeNumaNodesInBlocksAndSinglePeDaemonsSpread) {
  const std::vector<std::vector<int>> numa = {{0, 1}, {2, 3}};
  const CpuPlacement four = CpuPlacement::by_numa_node(numa, 0, 4);
  EXPECT_EQ(four.cpus_of(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(four.cpus_of(1), (std::vector<int>{0, 1}));
  EXPECT_EQ(four.cpus_of(2), (std::vector<int>{2, 3}));
  EXPECT_EQ(four.cpus_of(3), (std::vector<int>{2, 3}));
  EXPECT_EQ(CpuPlacement::by_numa_node(numa, 0, 1).cpus_of(0), (std::vector<int>{0, 1}));
  EXPECT_EQ(CpuPlacement::by_numa_node(numa, 1, 1).cpus_of(0), (std::vector<int>{2, 3}));
  // One node: nothing to place.
  const CpuPlacement one = CpuPlacement::by_numa_node({{0, 1, 2, 3}}, 0, 2);
  EXPECT_TRUE(one.cpus_of(0).empty());
  EXPECT_EQ(one.describe(),
            "PEs run where the scheduler puts them (one NUMA node; --cpu-bind core binds them)");
  EXPECT_EQ(four.describe(),
            "PEs placed on NUMA nodes' CPUs 0-1; 0-1; 2-3; 2-3 (of 4 CPUs allowed)");
}

TEST(CpuBinding, ThreadsPlacedOnANodesCpusStartHelpersThere) {
  const std::vector<int> allowed = allowed_cpus();
  if (allowed.size() < 3) GTEST_SKIP() << "needs 3 CPUs to tell two of them from all";
  const std::vector<int> node = {allowed[0], allowed[1]};
  std::thread([&] {
    const ScopedCpuBinding placed(node);
    ASSERT_TRUE(placed.bound());
    cpu_set_t helper;
    std::thread([&] { pthread_getaffinity_np(pthread_self(), sizeof(helper), &helper); }).join();
    EXPECT_EQ(CPU_COUNT(&helper), 2);
    const ScopedUnbound anywhere;  // no wider mask to go to: a node's threads stay on it
    cpu_set_t during;
    pthread_getaffinity_np(pthread_self(), sizeof(during), &during);
    EXPECT_EQ(CPU_COUNT(&during), 2);
  }).join();
}

}  // namespace
}  // namespace symmesh
