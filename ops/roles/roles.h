// The two roles of a pipelined operator on one PE (the fused matmul + collective operators and
// the MoE dispatch and combine): compute threads (oneDNN, one OpenMP thread each) and comm
// threads, run side by side, each recording into the job trace.
#pragma once

#include <functional>
#include <string>

#include "runtime/pe.h"

namespace symmesh {

// Runs compute(i) for i < compute_threads and comm(j) for j < comm_threads, each on its own
// thread, and returns when all are done. The first exception aborts the node's doorbell (so
// every other wait ends at once) and is rethrown after all threads joined. The threads record
// into the caller's job trace as "compute i" and comm_thread_name(j) (default "comm j").
void run_roles(Pe& pe, int compute_threads, const std::function<void(int)>& compute,
               int comm_threads, const std::function<void(int)>& comm,
               const std::function<std::string(int)>& comm_thread_name = {});

// Sets the calling thread's OpenMP team size for the oneDNN calls it makes.
void set_gemm_threads(int threads);

// Seconds on the steady clock since an arbitrary origin.
double now_seconds();
// CPU seconds this process has used, all threads (io threads included).
double process_cpu_seconds();

}  // namespace symmesh
