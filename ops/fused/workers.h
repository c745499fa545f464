// The threads of a fused operator on one PE and what they share: compute threads (oneDNN, one
// OpenMP thread each) and comm threads, a serialized port to the PE's transports (a PE's
// queue pairs and connections belong to one thread at a time), and local counters that hand
// stages and tiles between the two roles.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

#include "ops/fused/operator.h"
#include "runtime/pe.h"

namespace symmesh {

// Runs compute(i) for i < compute_threads and comm(j) for j < comm_threads, each on its own
// thread, and returns when all are done. The first exception aborts the node's doorbell (so
// every other wait ends at once) and is rethrown after all threads joined. The threads record
// into the caller's job trace as "compute i" and comm_thread_name(j) (default "comm j").
void run_roles(Pe& pe, int compute_threads, const std::function<void(int)>& compute,
               int comm_threads, const std::function<void(int)>& comm,
               const std::function<std::string(int)>& comm_thread_name = {});

class CommPort;

// One run of a fused operator: a barrier (so no PE reuses memory a peer still reads from the
// previous run), then the compute and comm roles, then `finish` (still timed). compute(i)
// returns thread i's GEMM busy time. The figures: wall time, the compute threads' mean busy
// time, the bytes the comm threads moved, 2*m*n*k flops.
RunFigures run_pipelined(Pe& pe, const FusedOptions& options,
                         const std::function<double(int)>& compute,
                         const std::function<void(int, CommPort&)>& comm,
                         const std::function<void()>& finish = {});

// Sets the calling thread's OpenMP team size for the oneDNN calls it makes.
void set_gemm_threads(int threads);

// The PE's one-sided operations for several comm threads: one at a time, with the bytes sent
// to other PEs counted for the wire figure.
class CommPort {
 public:
  explicit CommPort(Pe& pe) : pe_(pe) {}
  Pe& pe() { return pe_; }
  void put(void* dest, const void* source, size_t bytes, int pe);
  void get(void* dest, const void* source, size_t bytes, int pe);
  void put_signal(void* dest, const void* source, size_t bytes, uint64_t* signal, uint64_t value,
                  SignalOp op, int pe);
  void signal_set(uint64_t* signal, uint64_t value, int pe);
  void signal_add(uint64_t* signal, uint64_t value, int pe);
  void quiet();
  uint64_t wire_bytes() const { return wire_bytes_.load(std::memory_order_relaxed); }

 private:
  void count(size_t bytes, int pe);
  Pe& pe_;
  std::mutex mutex_;
  std::atomic<uint64_t> wire_bytes_{0};
};

// A counter in this PE's private memory that one role raises and the other waits on.
class LocalCounter {
 public:
  void add(uint64_t value, Doorbell& bell) {
    value_.fetch_add(value, std::memory_order_release);
    bell.ring();
  }
  void set(uint64_t value, Doorbell& bell) {
    value_.store(value, std::memory_order_release);
    bell.ring();
  }
  uint64_t load() const { return value_.load(std::memory_order_acquire); }
  // Waits until the counter is at least `value`; `what` names it in a timeout.
  void wait_at_least(uint64_t value, Pe& pe, const std::string& what) const;

 private:
  alignas(64) std::atomic<uint64_t> value_{0};
};

// Seconds on the steady clock since an arbitrary origin.
double now_seconds();
// CPU seconds this process has used, all threads (io threads included).
double process_cpu_seconds();

}  // namespace symmesh
