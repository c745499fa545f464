#include "ops/fused/workers.h"

#include <omp.h>

#include <ctime>
#include <exception>
#include <thread>
#include <vector>

#include "common/trace.h"
#include "runtime/barrier.h"

namespace symmesh {

void run_roles(Pe& pe, int compute_threads, const std::function<void(int)>& compute,
               int comm_threads, const std::function<void(int)>& comm,
               const std::function<std::string(int)>& comm_thread_name) {
  std::mutex error_mutex;
  std::exception_ptr first_error;
  const trace::Context trace_context = trace::current();
  auto guarded = [&](const std::function<void(int)>& body, int index, bool computes) {
    return [&, index, computes] {
      const trace::ThreadBinding traced(trace_context, computes ? "compute " + std::to_string(index)
                                                       : comm_thread_name
                                                           ? comm_thread_name(index)
                                                           : "comm " + std::to_string(index));
      try {
        if (computes) set_gemm_threads(1);
        body(index);
      } catch (const std::exception& error) {
        std::lock_guard lock(error_mutex);
        if (!first_error) {
          first_error = std::current_exception();
          pe.node().doorbell().abort(pe_error(pe.my_pe(), error.what()));
        }
      }
    };
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < compute_threads; ++i) threads.emplace_back(guarded(compute, i, true));
  for (int j = 0; j < comm_threads; ++j) threads.emplace_back(guarded(comm, j, false));
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

RunFigures run_pipelined(Pe& pe, const FusedOptions& o, const std::function<double(int)>& compute,
                         const std::function<void(int, CommPort&)>& comm,
                         const std::function<void()>& finish) {
  std::vector<double> busy(o.compute_threads, 0.0);
  CommPort port(pe);
  barrier_all(pe);
  const double start = now_seconds();
  run_roles(
      pe, o.compute_threads, [&](int i) { busy[i] = compute(i); }, o.comm_threads,
      [&](int j) { comm(j, port); });
  if (finish) finish();
  RunFigures figures;
  figures.total_s = now_seconds() - start;
  for (double b : busy) figures.compute_s += b / o.compute_threads;
  figures.wire_bytes = port.wire_bytes();
  figures.flops = 2.0 * double(o.m) * double(o.n) * double(o.k);
  return figures;
}

void set_gemm_threads(int threads) {
  omp_set_num_threads(threads);
}

void CommPort::count(size_t bytes, int pe) {
  if (pe != pe_.my_pe()) wire_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void CommPort::put(void* dest, const void* source, size_t bytes, int pe) {
  std::lock_guard lock(mutex_);
  pe_.put(dest, source, bytes, pe);
  count(bytes, pe);
}

void CommPort::get(void* dest, const void* source, size_t bytes, int pe) {
  std::lock_guard lock(mutex_);
  pe_.get(dest, source, bytes, pe);
  count(bytes, pe);
}

void CommPort::put_signal(void* dest, const void* source, size_t bytes, uint64_t* signal,
                          uint64_t value, SignalOp op, int pe) {
  std::lock_guard lock(mutex_);
  pe_.put_signal(dest, source, bytes, signal, value, op, pe);
  count(bytes, pe);
}

void CommPort::signal_set(uint64_t* signal, uint64_t value, int pe) {
  std::lock_guard lock(mutex_);
  pe_.signal_set(signal, value, pe);
}

void CommPort::signal_add(uint64_t* signal, uint64_t value, int pe) {
  std::lock_guard lock(mutex_);
  pe_.signal_add(signal, value, pe);
}

void CommPort::quiet() {
  std::lock_guard lock(mutex_);
  pe_.quiet();
}

void LocalCounter::wait_at_least(uint64_t value, Pe& pe, const std::string& what) const {
  wait_until(
      pe.node().doorbell(), pe.deadline(), [&] { return load() >= value; },
      [&] {
        return "PE " + std::to_string(pe.my_pe()) + ": " + what + ": waited for " +
               std::to_string(value) + ", saw " + std::to_string(load());
      },
      pe.node().wait_policy());
}

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

double now_seconds() {
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

}  // namespace symmesh
