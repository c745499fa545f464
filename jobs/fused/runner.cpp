#include "jobs/fused/runner.h"

#include <algorithm>
#include <cmath>

#include "common/progress.h"
#include "jobs/fused/reference.h"
#include "ops/fused/mode_run.h"
#include "ops/npy.h"
#include "ops/pe_stats.h"

namespace symmesh {
namespace {

struct Errors {
  double abs = 0, largest = 0;
  bool gather_equal = true;
};

Errors compare(const FusedTensors& t, const Reference& ref) {
  Errors e;
  for (size_t i = 0; i < ref.c.size(); ++i) {
    e.abs = std::max(e.abs, double(std::fabs(t.c[i] - ref.c[i])));
    if (std::isnan(t.c[i])) e.abs = INFINITY;
    e.largest = std::max(e.largest, double(std::fabs(ref.c[i])));
  }
  e.gather_equal = t.gather_out == ref.gather_out;
  return e;
}

void write_outputs(const FusedJob& job, const Pe& pe, const FusedTensors& t) {
  const FusedOptions& o = job.options;
  const std::string me = std::to_string(pe.my_pe());
  write_npy_f32(job.output_dir + "/C_" + me + ".npy", t.c.data(), int64_t(t.c.size()) / o.n, o.n);
  if (o.op == FusedOp::kAllgatherMatmul) {
    const std::string descr = o.dtype == DType::kF32   ? "<f4"
                              : o.dtype == DType::kF16 ? "<f2"
                                                       : "<u2";
    write_npy(job.output_dir + "/gather_out_" + me + ".npy", descr, t.gather_out.data(), o.m, o.k);
  }
}

}  // namespace

FusedReport run_fused_job(Pe& pe, Gemm& gemm, const FusedJob& job) {
  const FusedOptions& o = job.options;
  validate(o, pe.n_pes());
  if (job.iters < 1 || job.iters > 1000) {
    throw InvalidArgument("iters = " + std::to_string(job.iters) +
                          " is out of range: allowed 1 to 1000");
  }
  const std::string plan_key = job.mode == FusedMode::kAuto ? fused_plan_key(o, pe) : "";
  const std::optional<FusedMode> plan =
      job.mode == FusedMode::kAuto ? agreed_plan(pe, job.plans, plan_key) : std::nullopt;
  FusedTensors inputs;
  inputs.a = input_a(o, pe.n_pes(), pe.my_pe(), job.inputs);
  inputs.b = input_b(o, job.inputs);

  // The sequential baseline always runs: its phases are compute-only and comm-only. The
  // modes take turns, iteration by iteration, so a slow spell of a noisy machine falls on both.
  ModeRun sequential("sequential run", make_sequential(pe, gemm, o), o, pe, inputs);
  std::optional<ModeRun> fused;
  if (job.mode != FusedMode::kSequential) {
    fused.emplace("fused run", make_fused(pe, gemm, o), o, pe, inputs);
  }
  progress::set_total(uint32_t(job.iters) * (fused ? 2 : 1));
  for (int i = 0; i < job.iters; ++i) {
    sequential.measure(pe);
    progress::step();
    if (fused) {
      fused->measure(pe);
      progress::step();
    }
  }
  FusedReport r;
  r.chosen = fused ? FusedMode::kFused : FusedMode::kSequential;
  if (job.mode == FusedMode::kAuto) {
    r.planned = !plan;
    r.chosen = plan ? *plan : faster_mode(sequential.total, fused->total);
    if (!plan && job.plans) job.plans->store(plan_key, r.chosen);
  }
  const ModeRun& chosen = r.chosen == FusedMode::kFused ? *fused : sequential;
  r.gemm_path = gemm.path(o.dtype);
  r.iteration_s = chosen.total;
  r.compute_s = median(sequential.compute);
  r.comm_s = median(sequential.comm);
  r.comm_cpu_s = median(sequential.comm_cpu);
  r.sequential_s = median(sequential.total);
  r.compute_gflops = sequential.flops / r.compute_s / 1e9;
  const double time = median(chosen.total);
  if (fused) {
    r.pipelined_s = median(fused->total);
    r.fused_compute_s = median(fused->compute);
    r.speedup = r.sequential_s / *r.pipelined_s;
    r.time_saved_s = r.sequential_s - *r.pipelined_s;
    const double shorter = std::min(r.compute_s, r.comm_s);
    r.overlap_efficiency =
        shorter > 0 ? std::clamp((r.compute_s + r.comm_s - *r.pipelined_s) / shorter, 0.0, 1.0)
                    : 0.0;
    r.compute_slowdown = *r.fused_compute_s / r.compute_s;
    r.fused_gemm_gflops = fused->flops / *r.fused_compute_s / 1e9;
  }
  r.gflops = chosen.flops / time / 1e9;
  r.wire_bytes = chosen.wire_bytes;
  r.wire_gbps = double(chosen.wire_bytes) / time / 1e9;

  bool deterministic = sequential.deterministic && (!fused || fused->deterministic);
  r.deterministic =
      pe.exchange(pe.team_world(), deterministic ? 1 : 0) == std::vector<uint64_t>(pe.n_pes(), 1);
  if (job.verify) {
    const Reference ref = reference_output(gemm, o, pe.n_pes(), pe.my_pe(), job.inputs);
    Errors e = compare(sequential.tensors, ref);
    bool gather_equal = e.gather_equal;
    if (fused) {
      const Errors f = compare(fused->tensors, ref);
      e.abs = std::max(e.abs, f.abs);
      gather_equal = gather_equal && f.gather_equal;
    }
    r.max_abs_err = max_over_pes(pe, e.abs);
    r.max_rel_err = r.max_abs_err / std::max(max_over_pes(pe, e.largest), 1e-30);
    r.tolerance = tolerance(o, pe.n_pes(), max_over_pes(pe, ref.max_abs_input_product));
    const bool all_gathered = max_over_pes(pe, gather_equal ? 0.0 : 1.0) == 0.0;
    r.verified = r.max_abs_err <= r.tolerance && all_gathered;
  }
  if (!job.output_dir.empty()) write_outputs(job, pe, chosen.tensors);
  return r;
}

}  // namespace symmesh
