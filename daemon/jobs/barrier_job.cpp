#include "common/progress.h"
#include "daemon/jobs/job.h"
#include "runtime/barrier.h"

namespace symmesh {

PeJobOutcome run_barrier_job(Pe& pe, const wire::BarrierJob& job) {
  // A job that names no algorithm runs the daemon's configured one (--barrier-algo).
  BarrierOptions options = pe.node().config().barrier;
  if (!job.algo().empty()) options.algo = parse_barrier_algo(job.algo());
  if (job.k() != 0) options.k = int(job.k());
  PeJobOutcome outcome;
  for (int i = 0; i < 10; ++i) barrier_all(pe, options);  // warm up connections and caches
  outcome.iteration_s.reserve(job.iters());
  progress::set_total(job.iters());
  for (uint32_t i = 0; i < job.iters(); ++i) {
    const auto start = Clock::now();
    barrier_all(pe, options);
    outcome.iteration_s.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    progress::step();
  }
  return outcome;
}

}  // namespace symmesh
