// A fused job on one PE, as the daemon and the tests run it: inputs, a warm-up of each mode,
// then `iters` timed runs with the sequential baseline and the fused operator taking turns (in
// `auto` too: the job's figures are both modes', its time and output the chosen one's); the
// figures every fused op reports (docs/ARCHITECTURE.md; medians over iterations of the slowest PE),
// verification against the reference, determinism across iterations, and the outputs as .npy.
// Every PE calls it with the same job and gets the same report.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "jobs/fused/inputs.h"
#include "ops/fused/mode_plans.h"
#include "ops/fused/operator.h"

namespace symmesh {

struct FusedJob {
  FusedOptions options;
  FusedMode mode = FusedMode::kBoth;
  int iters = 5;
  bool verify = false;
  InputSpec inputs;
  std::string output_dir;           // empty: no files
  FusedModePlans* plans = nullptr;  // auto: the plans kept between jobs (null: none kept)
};

struct FusedReport {
  bool verified = false;  // meaningful when the job asked to verify
  double max_abs_err = 0, max_rel_err = 0, tolerance = 0;
  bool deterministic = true;  // every iteration's output bitwise equal to the first
  double compute_s = 0;       // compute-only: the standalone GEMM (sequential mode's phase)
  double comm_s = 0;          // comm-only: the collective alone
  double comm_cpu_s = 0;      // CPU time a node spent in comm-only (all its threads)
  double sequential_s = 0;
  std::optional<double> pipelined_s;      // the fused run (absent in sequential mode)
  std::optional<double> fused_compute_s;  // GEMM busy time inside the fused run
  double speedup = 0, time_saved_s = 0, overlap_efficiency = 0, compute_slowdown = 0;
  double gflops = 0;          // this job's GEMM work per PE / the time of the chosen mode
  double compute_gflops = 0;  // per PE, standalone GEMM
  double fused_gemm_gflops = 0;
  double wire_gbps = 0;  // bytes on the wire per PE / the time of the chosen mode
  uint64_t wire_bytes = 0;
  std::string gemm_path;
  std::vector<double> iteration_s;       // the chosen mode's runs, each the slowest PE's time
  FusedMode chosen = FusedMode::kFused;  // whose time and output are the job's (both: fused)
  bool planned = false;                  // auto: this job's runs made the plan (else it was kept)
};

// Throws InvalidArgument for bad options or inputs before any PE allocates anything.
FusedReport run_fused_job(Pe& pe, Gemm& gemm, const FusedJob& job);

}  // namespace symmesh
