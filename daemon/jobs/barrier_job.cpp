// The barrier job: `iters` timed barriers after a warm-up, each PE timing its own.
#include "common/errors.h"
#include "common/progress.h"
#include "daemon/jobs/job.h"
#include "runtime/barrier.h"
#include "runtime/enum_words.h"

namespace symmesh {
namespace {

class BarrierJobKind : public JobKind {
 public:
  wire::JobKind wire_kind(const wire::JobSpec&) const override { return wire::JOB_KIND_BARRIER; }

  void fill_defaults(wire::JobSpec& spec, const JobDefaults& defaults) const override {
    auto* job = spec.mutable_barrier();
    if (job->algo() == wire::BARRIER_ALGO_UNSPECIFIED) job->set_algo(defaults.barrier_algo);
    if (job->k() == 0) job->set_k(defaults.barrier_k);
  }

  void check(const wire::JobSpec& spec, const ClusterShape&) const override {
    const auto& job = spec.barrier();
    wire::check_enum(job.algo(), "--algo", true);
    if (job.k() != 0 && (job.k() < 2 || job.k() > 16)) {
      throw InvalidArgument("--k " + std::to_string(job.k()) + " is outside 2..16");
    }
    check_iterations(job.iters(), 100000);
  }

  PeJobOutcome run_on_pe(Pe& pe, const wire::JobSpec& spec) const override {
    const auto& job = spec.barrier();
    // A job that names no algorithm runs the daemon's configured one (--barrier-algo).
    BarrierOptions options = pe.node().config().barrier;
    options.algo = wire::from_wire(job.algo(), options.algo, "--algo");
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

  // The latency histogram of /metrics (symmesh_barrier_latency_seconds).
  void record_metrics(Metrics& metrics, const std::vector<double>& iteration_s) const override {
    metrics.barrier_latencies(iteration_s);
  }

  void summarize(const wire::JobSpec& spec, const ClusterShape&, double,
                 wire::JobResult& result) const override {
    result.set_algo(wire::enum_text(spec.barrier().algo()));
  }
};

}  // namespace

const JobKind& barrier_job_kind() {
  static const BarrierJobKind kind;
  return kind;
}

}  // namespace symmesh
