// The matmul job: a fused operator (or its sequential baseline) through jobs/fused/runner.
#include <algorithm>
#include <filesystem>

#include "daemon/jobs/job.h"
#include "jobs/fused/runner.h"
#include "ops/enum_words.h"

namespace symmesh {
namespace {

FusedJob fused_job(const wire::MatmulJob& w) {
  wire::check_enum(w.op(), "--op");
  wire::check_enum(w.dtype(), "--dtype", true);
  wire::check_enum(w.mode(), "--mode", true);
  wire::check_enum(w.transfer(), "--transfer", true);
  FusedJob job;
  FusedOptions& o = job.options;
  o.op = wire::from_wire(w.op(), o.op, "--op");
  o.m = int64_t(w.m());
  o.n = int64_t(w.n());
  o.k = int64_t(w.k());
  o.dtype = dtype_of(w.dtype(), DType::kBF16);
  if (w.tile_m()) o.tile_m = w.tile_m();
  if (w.tile_n()) o.tile_n = w.tile_n();
  o.tile_k = w.tile_k();
  if (w.stages()) o.stages = int(w.stages());
  if (w.comm_interval()) o.comm_interval = int(w.comm_interval());
  o.subtile_m = w.subtile_m();
  if (w.compute_threads()) o.compute_threads = int(w.compute_threads());
  if (w.comm_threads()) o.comm_threads = int(w.comm_threads());
  o.transfer = wire::from_wire(w.transfer(), o.transfer, "--transfer");
  job.mode = wire::from_wire(w.mode(), FusedMode::kBoth, "--mode");
  job.iters = int(w.iters());
  job.verify = w.verify();
  job.inputs.dir = w.inputs();
  if (w.seed()) job.inputs.seed = w.seed();
  job.output_dir = w.output();
  job.plans = &daemon_fused_plans();
  return job;
}

PeJobOutcome run_matmul(Pe& pe, const wire::MatmulJob& job) {
  const FusedJob fused = fused_job(job);
  if (!fused.output_dir.empty()) std::filesystem::create_directories(fused.output_dir);
  const FusedReport r = run_fused_job(pe, daemon_gemm(), fused);
  PeJobOutcome outcome;
  outcome.iteration_s = r.iteration_s;
  outcome.verified = r.verified;
  outcome.max_abs_err = r.max_abs_err;
  wire::MatmulFigures& f = *outcome.figures.mutable_matmul();
  f.set_compute_s(r.compute_s);
  f.set_compute_threads(uint32_t(fused.options.compute_threads));
  f.set_comm_threads(uint32_t(fused.options.comm_threads));
  f.set_comm_s(r.comm_s);
  f.set_comm_cpu_s(r.comm_cpu_s);
  f.set_sequential_s(r.sequential_s);
  if (r.pipelined_s) {  // the sequential mode measures none of these
    f.set_pipelined_s(*r.pipelined_s);
    f.set_fused_compute_s(r.fused_compute_s.value_or(0));
    f.set_speedup(r.speedup);
    f.set_time_saved_s(r.time_saved_s);
    f.set_overlap_efficiency(r.overlap_efficiency);
    f.set_compute_slowdown(r.compute_slowdown);
    f.set_fused_gemm_gflops(r.fused_gemm_gflops);
  }
  f.set_gflops(r.gflops);
  f.set_compute_gflops(r.compute_gflops);
  f.set_wire_gbps(r.wire_gbps);
  f.set_wire_bytes(r.wire_bytes);
  f.set_gemm_path(r.gemm_path);
  if (job.verify()) {
    f.set_max_rel_err(r.max_rel_err);
    f.set_tolerance(r.tolerance);
  }
  f.set_deterministic(r.deterministic);
  f.set_mode(wire::to_wire(fused.mode));
  f.set_chosen(wire::to_wire(r.chosen));
  if (fused.mode == FusedMode::kAuto) f.set_planned(r.planned);
  f.set_transfer(wire::to_wire(fused.options.transfer));
  return outcome;
}

// One PE of a fused matmul job: per mode its A, B, C and the warm-up's C kept for the
// determinism check (and the gathered A); inputs generated in f32 first; with --verify the
// reference's f32 copies of A and B, one product band and its C.
uint64_t matmul_pe_bytes(const wire::MatmulJob& job, int n_pes) {
  const uint64_t m = job.m(), n = job.n(), k = job.k();
  const uint64_t e = job.dtype() == wire::DATA_TYPE_F32 ? 4 : 2;
  const bool gathered = job.op() == wire::MATMUL_OP_ALLGATHER_MATMUL;
  const uint64_t a_rows = gathered ? (m + n_pes - 1) / n_pes : m;
  const uint64_t c_rows =
      job.op() == wire::MATMUL_OP_MATMUL_REDUCE_SCATTER ? (m + n_pes - 1) / n_pes : m;
  const uint64_t a = a_rows * k * e, b = k * n * e, c = c_rows * n * 4;
  const uint64_t per_mode = a + b + 2 * c + (gathered ? m * k * e : 0);
  // The sequential baseline runs in every mode, the fused operator in all but `sequential`.
  const uint64_t modes = job.mode() == wire::MATMUL_MODE_SEQUENTIAL ? 1 : 2;
  const uint64_t generate = std::max(a_rows * k, k * n) * 4;
  const uint64_t verify =
      job.verify() ? k * n * 4 + a_rows * k * 4 + 2 * c_rows * n * 4 + (gathered ? m * k * e : 0)
                   : 0;
  return modes * per_mode + generate + verify;
}

class MatmulJobKind : public JobKind {
 public:
  wire::JobKind wire_kind(const wire::JobSpec&) const override { return wire::JOB_KIND_MATMUL; }

  void fill_defaults(wire::JobSpec& spec, const JobDefaults& defaults) const override {
    wire::MatmulJob& job = *spec.mutable_matmul();
    if (!job.compute_threads()) job.set_compute_threads(uint32_t(defaults.fused_threads.compute));
    if (!job.comm_threads()) job.set_comm_threads(uint32_t(defaults.fused_threads.comm));
  }

  void check(const wire::JobSpec& spec, const ClusterShape& shape) const override {
    validate(fused_job(spec.matmul()).options, shape.n_pes());
    check_iterations(spec.matmul().iters(), 1000);
  }

  std::vector<std::pair<std::string*, std::string>> paths(wire::JobSpec& spec) const override {
    return {{spec.mutable_matmul()->mutable_inputs(), "--inputs"},
            {spec.mutable_matmul()->mutable_output(), "--output"}};
  }

  uint64_t pe_host_bytes(const wire::JobSpec& spec, int pes) const override {
    return matmul_pe_bytes(spec.matmul(), pes);
  }

  bool verify_requested(const wire::JobSpec& spec) const override { return spec.matmul().verify(); }

  PeJobOutcome run_on_pe(Pe& pe, const wire::JobSpec& spec) const override {
    return run_matmul(pe, spec.matmul());
  }

  void summarize(const wire::JobSpec& spec, const ClusterShape&, double,
                 wire::JobResult& result) const override {
    const auto& job = spec.matmul();
    const FusedJob fused = fused_job(job);
    result.set_op(wire::enum_text(job.op()));
    result.set_dtype(wire::word(fused.options.dtype));
    result.set_algo(wire::word(fused.mode));
  }
};

}  // namespace

Gemm& daemon_gemm() {
  static Gemm gemm;
  return gemm;
}

FusedModePlans& daemon_fused_plans() {
  static FusedModePlans plans;
  return plans;
}

const JobKind& matmul_job_kind() {
  static const MatmulJobKind kind;
  return kind;
}

}  // namespace symmesh
