#include "common/cpu_binding.h"

#include <pthread.h>

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
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return cpus;  // over CPU_SETSIZE CPUs
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &mask)) cpus.push_back(cpu);
  }
  return cpus;
}

CpuPlacement::CpuPlacement(std::vector<int> allowed, int node_rank, int ranks_per_node)
    : allowed_(std::move(allowed)) {
  if (allowed_.empty() || size_t(ranks_per_node) > allowed_.size()) return;
  for (int local = 0; local < ranks_per_node; ++local) {
    pe_cpus_.push_back(allowed_[(size_t(node_rank) * ranks_per_node + local) % allowed_.size()]);
  }
}

std::optional<int> CpuPlacement::cpu_of(int local) const {
  if (local < 0 || size_t(local) >= pe_cpus_.size()) return std::nullopt;
  return pe_cpus_[local];
}

std::string CpuPlacement::describe() const {
  const std::string of = std::to_string(allowed_.size()) + " CPUs allowed";
  if (allowed_.empty()) return "PEs not bound to CPUs (the CPUs allowed are not known)";
  if (pe_cpus_.empty()) return "PEs not bound to CPUs (more PEs than the " + of + ")";
  std::string text = "PEs bound to CPUs";
  for (size_t local = 0; local < pe_cpus_.size(); ++local) {
    text += (local == 0 ? " " : ",") + std::to_string(pe_cpus_[local]);
  }
  return text + " (of " + of + ")";
}

ScopedCpuBinding::ScopedCpuBinding(std::optional<int> cpu) {
  if (!cpu || *cpu < 0 || *cpu >= CPU_SETSIZE) return;
  const std::optional<cpu_set_t> before = current_mask();
  if (!before) return;
  // Only a CPU of the process's set: a thread may widen its own mask past what the daemon was
  // given (by taskset, say), but must not.
  if (!CPU_ISSET(*cpu, unbound_mask ? &*unbound_mask : &*before)) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(*cpu, &one);
  if (!set_mask(one)) return;
  saved_ = before;
  outer_unbound_ = unbound_mask;
  if (!unbound_mask) unbound_mask = before;  // nested: helpers still get the outermost mask
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
