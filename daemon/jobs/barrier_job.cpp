#include "daemon/jobs/job.h"
#include "runtime/barrier.h"

namespace symmesh {

PeJobOutcome run_barrier_job(Pe& pe, const wire::BarrierJob& job) {
  const BarrierOptions options{parse_barrier_algo(job.algo()), job.k() ? int(job.k()) : 8};
  PeJobOutcome outcome;
  for (int i = 0; i < 10; ++i) barrier_all(pe, options);  // warm up connections and caches
  outcome.iteration_s.reserve(job.iters());
  for (uint32_t i = 0; i < job.iters(); ++i) {
    const auto start = Clock::now();
    barrier_all(pe, options);
    outcome.iteration_s.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return outcome;
}

}  // namespace symmesh
