#include "ops/fused/runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/progress.h"
#include "common/trace.h"
#include "ops/fused/reference.h"
#include "ops/npy.h"
#include "ops/pe_stats.h"

namespace symmesh {
namespace {

// One mode's operator, tensors and samples. Each figure of an iteration is the slowest PE's.
struct ModeRun {
  const char* name;  // of its spans in a job trace
  std::unique_ptr<FusedOperator> op;
  FusedTensors tensors;
  std::vector<float> first;  // the warm-up's output, which every iteration must equal bitwise
  std::vector<double> total, compute, comm, comm_cpu;
  uint64_t wire_bytes = 0;
  double flops = 0;
  bool deterministic = true;

  ModeRun(const char* mode_name, std::unique_ptr<FusedOperator> mode, const FusedJob& job,
          const Pe& pe, FusedTensors inputs)
      : name(mode_name), op(std::move(mode)), tensors(std::move(inputs)) {
    shape_tensors(job.options, pe, tensors);
    op->run(tensors);  // the warm-up: primitives created, pages touched
    first = tensors.c;
  }

  void measure(Pe& pe) {
    const RunFigures f = [&] {
      const trace::Scope span(name, "iteration");
      return op->run(tensors);
    }();
    total.push_back(max_over_pes(pe, f.total_s));
    compute.push_back(max_over_pes(pe, f.compute_s));
    comm.push_back(max_over_pes(pe, f.comm_s));
    comm_cpu.push_back(max_over_pes(pe, f.comm_cpu_s));
    wire_bytes = uint64_t(max_over_pes(pe, double(f.wire_bytes)));
    flops = f.flops;
    // Bitwise: the same floats with the same bits (an empty band is trivially equal).
    deterministic =
        deterministic && (first.empty() || std::memcmp(first.data(), tensors.c.data(),
                                                       first.size() * sizeof(float)) == 0);
  }
};

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

FusedMode parse_fused_mode(const std::string& name) {
  if (name == "fused") return FusedMode::kFused;
  if (name == "sequential") return FusedMode::kSequential;
  if (name == "both") return FusedMode::kBoth;
  throw InvalidArgument("unknown mode '" + name + "': allowed fused, sequential, both");
}

const char* fused_mode_name(FusedMode mode) {
  return mode == FusedMode::kFused        ? "fused"
         : mode == FusedMode::kSequential ? "sequential"
                                          : "both";
}

FusedReport run_fused_job(Pe& pe, Gemm& gemm, const FusedJob& job) {
  const FusedOptions& o = job.options;
  validate(o, pe.n_pes());
  if (job.iters < 1 || job.iters > 1000) {
    throw InvalidArgument("iters = " + std::to_string(job.iters) +
                          " is out of range: allowed 1 to 1000");
  }
  FusedTensors inputs;
  inputs.a = input_a(o, pe.n_pes(), pe.my_pe(), job.inputs);
  inputs.b = input_b(o, job.inputs);

  // The sequential baseline always runs: its phases are compute-only and comm-only. The
  // modes take turns, iteration by iteration, so a slow spell of a noisy machine falls on both.
  ModeRun sequential("sequential run", make_sequential(pe, gemm, o), job, pe, inputs);
  std::optional<ModeRun> fused;
  if (job.mode != FusedMode::kSequential) {
    fused.emplace("fused run", make_fused(pe, gemm, o), job, pe, inputs);
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
  const ModeRun& chosen = fused ? *fused : sequential;

  FusedReport r;
  r.gemm_path = gemm.path(o.dtype);
  r.iteration_s = chosen.total;
  r.compute_s = median(sequential.compute);
  r.comm_s = median(sequential.comm);
  r.comm_cpu_s = median(sequential.comm_cpu);
  r.sequential_s = median(sequential.total);
  r.compute_gflops = sequential.flops / r.compute_s / 1e9;
  const double time = fused ? median(fused->total) : r.sequential_s;
  if (fused) {
    r.pipelined_s = time;
    r.fused_compute_s = median(fused->compute);
    r.speedup = r.sequential_s / time;
    r.time_saved_s = r.sequential_s - time;
    const double shorter = std::min(r.compute_s, r.comm_s);
    r.overlap_efficiency =
        shorter > 0 ? std::clamp((r.compute_s + r.comm_s - time) / shorter, 0.0, 1.0) : 0.0;
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
