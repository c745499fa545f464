// Binding a daemon's PE threads to CPUs, as MPI's --bind-to core does. A bound PE keeps its
// cache and is not moved by the scheduler between the moments it waits and the moments it
// works; the threads a PE starts for itself (comm roles, GEMM tiles) run on any CPU the daemon
// may use, so they are not crowded onto the PE's one CPU.
#pragma once

#include <sched.h>

#include <optional>
#include <string>
#include <vector>

namespace symmesh {

// The CPUs this process may run on (its affinity mask), in increasing order.
std::vector<int> allowed_cpus();

// Which CPU each of a node's PEs is bound to, or none. Node `node_rank`'s PE `local` goes to
// allowed[(node_rank * ranks_per_node + local) % allowed.size()], so daemons of consecutive
// ranks on one host, with the same mask, take different CPUs while there are enough. A daemon
// with more PEs than CPUs leaves every PE unbound, as MPI leaves an oversubscribed node; it
// cannot see other daemons on its host, so several that together oversubscribe it still bind.
class CpuPlacement {
 public:
  CpuPlacement() = default;  // binds nothing
  CpuPlacement(std::vector<int> allowed, int node_rank, int ranks_per_node);
  // On a host of several NUMA nodes (each given by its CPUs): each PE's threads, its helpers
  // included, run on one node's CPUs, so the heap pages a PE touches first are its node's.
  // A daemon's PEs take the nodes in blocks; a daemon with fewer PEs than nodes starts at the
  // node its rank gives, so single-PE daemons of one host spread. One node: nothing placed.
  static CpuPlacement by_numa_node(const std::vector<std::vector<int>>& numa, int node_rank,
                                   int ranks_per_node);

  // The CPUs `local`'s threads run on; empty: wherever the scheduler puts them.
  std::vector<int> cpus_of(int local) const;
  // One line for the log: "PEs bound to CPUs 0,1" or why they are not.
  std::string describe() const;

 private:
  std::vector<int> allowed_;
  std::vector<std::vector<int>> pe_cpus_;  // empty: unbound
  bool numa_ = false;
};

// Binds the calling thread to `cpu` for this object's life (the thread's mask comes back
// afterwards). A failure (the CPU left the process's set) leaves the thread where it was.
class ScopedCpuBinding {
 public:
  explicit ScopedCpuBinding(std::optional<int> cpu);
  // Several CPUs (a NUMA node's): the threads this one starts run there too. One: as above.
  explicit ScopedCpuBinding(const std::vector<int>& cpus);
  ~ScopedCpuBinding();
  ScopedCpuBinding(const ScopedCpuBinding&) = delete;
  ScopedCpuBinding& operator=(const ScopedCpuBinding&) = delete;

  bool bound() const { return saved_.has_value(); }

 private:
  std::optional<cpu_set_t> saved_;
  std::optional<cpu_set_t> outer_unbound_;  // a binding this one nests in
};

// While alive, a bound calling thread may run on the CPUs it had before it was bound, so the
// threads it starts meanwhile inherit those. Does nothing on an unbound thread.
class ScopedUnbound {
 public:
  ScopedUnbound();
  ~ScopedUnbound();
  ScopedUnbound(const ScopedUnbound&) = delete;
  ScopedUnbound& operator=(const ScopedUnbound&) = delete;

 private:
  std::optional<cpu_set_t> bound_;
};

}  // namespace symmesh
