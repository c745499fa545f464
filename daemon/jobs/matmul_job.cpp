// The matmul job: a fused operator (or its sequential baseline) through ops/fused/runner, with
// one oneDNN primitive cache for the daemon's whole life, shared by its PEs and jobs.
#include <filesystem>

#include "daemon/jobs/job.h"
#include "ops/fused/runner.h"

namespace symmesh {
namespace {

FusedJob fused_job(const wire::MatmulJob& w) {
  FusedJob job;
  FusedOptions& o = job.options;
  o.op = parse_fused_op(w.op());
  o.m = int64_t(w.m());
  o.n = int64_t(w.n());
  o.k = int64_t(w.k());
  o.dtype = parse_dtype(w.dtype().empty() ? "bf16" : w.dtype());
  if (w.tile_m()) o.tile_m = w.tile_m();
  if (w.tile_n()) o.tile_n = w.tile_n();
  o.tile_k = w.tile_k();
  if (w.stages()) o.stages = int(w.stages());
  if (w.comm_interval()) o.comm_interval = int(w.comm_interval());
  if (w.subtile_m()) o.subtile_m = w.subtile_m();
  if (w.compute_threads()) o.compute_threads = int(w.compute_threads());
  if (w.comm_threads()) o.comm_threads = int(w.comm_threads());
  if (!w.transfer().empty()) o.transfer = parse_stage_transfer(w.transfer());
  job.mode = parse_fused_mode(w.mode().empty() ? "both" : w.mode());
  job.iters = int(w.iters());
  job.verify = w.verify();
  job.inputs.dir = w.inputs();
  if (w.seed()) job.inputs.seed = w.seed();
  job.output_dir = w.output();
  return job;
}

Gemm& daemon_gemm() {
  static Gemm gemm;
  return gemm;
}

}  // namespace

void check_matmul_job(const wire::MatmulJob& job, int n_pes) {
  validate(fused_job(job).options, n_pes);
  if (job.iters() > 1000) {
    throw InvalidArgument("--iters " + std::to_string(job.iters()) + " is outside 1..1000");
  }
}

PeJobOutcome run_matmul_job(Pe& pe, const wire::MatmulJob& job) {
  const FusedJob fused = fused_job(job);
  if (!fused.output_dir.empty()) std::filesystem::create_directories(fused.output_dir);
  const FusedReport r = run_fused_job(pe, daemon_gemm(), fused);
  PeJobOutcome outcome;
  outcome.iteration_s.push_back(r.pipelined_s.value_or(r.sequential_s));
  outcome.verified = r.verified;
  outcome.max_abs_err = r.max_abs_err;
  wire::MatmulFigures& f = outcome.matmul.emplace();
  f.set_compute_s(r.compute_s);
  f.set_comm_s(r.comm_s);
  f.set_comm_cpu_s(r.comm_cpu_s);
  f.set_sequential_s(r.sequential_s);
  f.set_pipelined(r.pipelined_s.has_value());
  f.set_pipelined_s(r.pipelined_s.value_or(0));
  f.set_fused_compute_s(r.fused_compute_s.value_or(0));
  f.set_speedup(r.speedup);
  f.set_time_saved_s(r.time_saved_s);
  f.set_overlap_efficiency(r.overlap_efficiency);
  f.set_compute_slowdown(r.compute_slowdown);
  f.set_gflops(r.gflops);
  f.set_compute_gflops(r.compute_gflops);
  f.set_fused_gemm_gflops(r.fused_gemm_gflops);
  f.set_wire_gbps(r.wire_gbps);
  f.set_wire_bytes(r.wire_bytes);
  f.set_gemm_path(r.gemm_path);
  f.set_max_rel_err(r.max_rel_err);
  f.set_tolerance(r.tolerance);
  f.set_deterministic(r.deterministic);
  f.set_mode(fused_mode_name(fused.mode));
  f.set_transfer(stage_transfer_name(fused.options.transfer));
  return outcome;
}

}  // namespace symmesh
