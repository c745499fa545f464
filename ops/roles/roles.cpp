#include "ops/roles/roles.h"

#include <omp.h>

#include <ctime>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "common/cpu_binding.h"
#include "common/trace.h"

namespace symmesh {

void run_roles(Pe& pe, int compute_threads, const std::function<void(int)>& compute,
               int comm_threads, const std::function<void(int)>& comm,
               const std::function<std::string(int)>& comm_thread_name) {
  std::mutex error_mutex;
  std::exception_ptr first_error;
  const trace::Context trace_context = trace::current();
  auto guarded = [&](const std::function<void(int)>& body, int index, bool computes) {
    return [&, index, computes] {
      try {
        const trace::ThreadBinding traced(trace_context,
                                          computes           ? "compute " + std::to_string(index)
                                          : comm_thread_name ? comm_thread_name(index)
                                                             : "comm " + std::to_string(index));
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
  std::vector<std::jthread> threads;  // joined on every way out, a failed start included
  threads.reserve(size_t(compute_threads) + size_t(comm_threads));
  try {
    const ScopedUnbound anywhere;  // the roles share the daemon's CPUs, not the PE's one
    for (int i = 0; i < compute_threads; ++i) threads.emplace_back(guarded(compute, i, true));
    for (int j = 0; j < comm_threads; ++j) threads.emplace_back(guarded(comm, j, false));
  } catch (...) {
    // The roles already started would wait for the missing one: stop them at their next wait.
    pe.node().doorbell().abort("a role's thread could not be started");
    throw;
  }
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

void set_gemm_threads(int threads) {
  omp_set_num_threads(threads);
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
