// The CPUs a daemon's jobs may use, as the machine says: the affinity mask it was started
// with, its cgroup's CPU quota (cgroup v2's cpu.max, or v1's cfs quota and period, the
// tightest of its cgroup and their ancestors) and the NUMA nodes those CPUs sit on. From it
// come the defaults a job gets when it does not say: the fused operators' compute and comm
// threads per PE, and where a PE's threads run on a host of several NUMA nodes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace symmesh {

// "0-3,8,10-11" (the kernel's cpulist form) as CPU numbers, increasing; throws
// InvalidArgument naming `what` when it is not one.
std::vector<int> parse_cpu_list(std::string_view text, const std::string& what);
// The reverse: increasing CPU numbers as "0-3,8,10-11".
std::string cpu_list_text(const std::vector<int>& cpus);

struct CpuBudget {
  std::vector<int> allowed;            // the affinity mask, increasing
  double quota = 0;                    // CPUs the cgroup allows; 0: no quota
  std::vector<std::vector<int>> numa;  // each NUMA node's allowed CPUs (one node when unknown)
  int usable = 1;                      // what jobs are sized for: at least 1
  bool from_flag = false;              // --cpus said so
  // More than the affinity mask (--cpus may ask for that: threads then share the CPUs).
  bool oversubscribed() const;
  // "16 CPUs (affinity 0-15, cgroup quota 12.0, 2 NUMA nodes)"
  std::string describe() const;
};

// Reads the quota and the NUMA nodes under `root` (a directory standing for /, for tests; ""
// is the machine's own). `cpus_flag` (--cpus; 0: not given) replaces what the machine allows.
CpuBudget read_cpu_budget(std::vector<int> allowed, int cpus_flag, const std::string& root = "");

// A fused operator's threads per PE when the job does not say: the node's usable CPUs split
// over its PEs, one comm thread per 8 CPUs of a PE's share (at least one), the rest computing.
inline constexpr int kMaxFusedThreads = 64;  // of each kind, per PE
struct FusedThreads {
  int compute = 1;
  int comm = 1;
};
FusedThreads default_fused_threads(int usable, int ranks_per_node);

}  // namespace symmesh
