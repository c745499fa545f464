#include "common/cpu_binding.h"

#include <pthread.h>

#include <cerrno>

#include "common/cpu_budget.h"

namespace symmesh {
namespace {

// The mask a bound thread had before its binding; empty on an unbound thread.
thread_local std::optional<cpu_set_t> unbound_mask;

bool set_mask(const cpu_set_t& mask) {
  return pthread_setaffinity_np(pthread_self(), sizeof(mask), &mask) == 0;
}

std::optional<cpu_set_t> current_mask() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (pthread_getaffinity_np(pthread_self(), sizeof(mask), &mask) != 0) return std::nullopt;
  return mask;
}

}  // namespace

std::vector<int> allowed_cpus() {
  // A mask as large as the kernel's: it refuses (EINVAL) one smaller than its CPU count.
  for (int size = CPU_SETSIZE; size <= (1 << 16); size *= 2) {
    cpu_set_t* mask = CPU_ALLOC(size);
    if (!mask) return {};
    const size_t bytes = CPU_ALLOC_SIZE(size);
    CPU_ZERO_S(bytes, mask);
    if (sched_getaffinity(0, bytes, mask) == 0) {
      std::vector<int> cpus;
      for (int cpu = 0; cpu < size; ++cpu) {
        if (CPU_ISSET_S(cpu, bytes, mask)) cpus.push_back(cpu);
      }
      CPU_FREE(mask);
      return cpus;
    }
    const int error = errno;
    CPU_FREE(mask);
    if (error != EINVAL) return {};
  }
  return {};
}

CpuPlacement::CpuPlacement(std::vector<int> allowed, int node_rank, int ranks_per_node)
    : allowed_(std::move(allowed)) {
  if (allowed_.empty() || size_t(ranks_per_node) > allowed_.size()) return;
  for (int local = 0; local < ranks_per_node; ++local) {
    pe_cpus_.push_back({allowed_[(size_t(node_rank) * ranks_per_node + local) % allowed_.size()]});
  }
}

CpuPlacement CpuPlacement::by_numa_node(const std::vector<std::vector<int>>& numa, int node_rank,
                                        int ranks_per_node) {
  CpuPlacement placement;
  for (const auto& cpus : numa)
    placement.allowed_.insert(placement.allowed_.end(), cpus.begin(), cpus.end());
  placement.numa_ = true;
  if (numa.size() < 2) return placement;
  const size_t nodes = numa.size(), ranks = size_t(ranks_per_node);
  for (size_t local = 0; local < ranks; ++local) {
    const size_t node =
        ranks >= nodes ? local * nodes / ranks : (size_t(node_rank) * ranks + local) % nodes;
    placement.pe_cpus_.push_back(numa[node]);
  }
  return placement;
}

std::vector<int> CpuPlacement::cpus_of(int local) const {
  if (local < 0 || size_t(local) >= pe_cpus_.size()) return {};
  return pe_cpus_[local];
}

std::string CpuPlacement::describe() const {
  const std::string of = std::to_string(allowed_.size()) + " CPUs allowed";
  if (allowed_.empty()) return "PEs not bound to CPUs (the CPUs allowed are not known)";
  if (pe_cpus_.empty() && numa_) {
    return "PEs run where the scheduler puts them (one NUMA node; --cpu-bind core binds them)";
  }
  if (pe_cpus_.empty()) return "PEs not bound to CPUs (more PEs than the " + of + ")";
  std::string text = numa_ ? "PEs placed on NUMA nodes' CPUs" : "PEs bound to CPUs";
  for (size_t local = 0; local < pe_cpus_.size(); ++local) {
    text += (local == 0 ? " " : numa_ ? "; " : ",") + cpu_list_text(pe_cpus_[local]);
  }
  return text + " (of " + of + ")";
}

ScopedCpuBinding::ScopedCpuBinding(std::optional<int> cpu)
    : ScopedCpuBinding(cpu ? std::vector<int>{*cpu} : std::vector<int>{}) {}

ScopedCpuBinding::ScopedCpuBinding(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  const std::optional<cpu_set_t> before = current_mask();
  if (!before) return;
  // Only CPUs of the process's set: a thread may widen its own mask past what the daemon was
  // given (by taskset, say), but must not.
  const cpu_set_t& process = unbound_mask ? *unbound_mask : *before;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  for (int cpu : cpus) {
    if (cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &process)) CPU_SET(cpu, &mask);
  }
  if (CPU_COUNT(&mask) == 0) return;
  if (!set_mask(mask)) return;
  saved_ = before;
  outer_unbound_ = unbound_mask;
  // Bound to one CPU, the threads it starts get the outermost mask (ScopedUnbound); to a NUMA
  // node's CPUs, they stay on them.
  if (cpus.size() == 1 && !unbound_mask) unbound_mask = before;
}

ScopedCpuBinding::~ScopedCpuBinding() {
  if (!saved_) return;
  set_mask(*saved_);
  unbound_mask = outer_unbound_;
}

ScopedUnbound::ScopedUnbound() {
  if (!unbound_mask) return;
  const std::optional<cpu_set_t> bound = current_mask();
  if (bound && set_mask(*unbound_mask)) bound_ = bound;
}

ScopedUnbound::~ScopedUnbound() {
  if (bound_) set_mask(*bound_);
}

}  // namespace symmesh
