// A MoE job on one PE, as the daemon runs it: inputs (seeded, or the routing from .npy), the
// timed operation (dispatch, or combine after an untimed dispatch that builds its handle), a
// warm-up then `iters` runs, the slowest PE's time per run, verification against the
// reference, bitwise determinism across runs, and the bytes it moved against what the flat
// algorithm would. Every PE calls it with the same job and gets the same report.
#pragma once

#include <string>
#include <vector>

#include "jobs/inputs.h"
#include "ops/moe/combine.h"

namespace symmesh {

enum class MoeOp { kDispatch, kCombine };

struct MoeJob {
  MoeOp op = MoeOp::kCombine;
  MoeOptions options;
  RoutingSpec routing;
  int iters = 5;
  bool verify = false;
  InputSpec inputs;        // the tokens and biases: seeded, or x_<pe>.npy / bias_<i>_<pe>.npy
  std::string output_dir;  // combine: combined_x_<pe>.npy (bf16 bit patterns)
};

struct MoeReport {
  bool verified = false;
  double max_abs_err = 0;
  double tolerance = 0;  // per element, relative to max(1, |reference|)
  bool deterministic = true;
  double median_s = 0;
  std::vector<double> iteration_s;  // every timed run, each the slowest PE's time
  double tokens_per_s = 0;          // every PE's tokens per second
  double algbw_gbps = 0;            // every PE's bf16 tokens (tokens x hidden x 2 bytes) per second
  int64_t inter_node_bytes = 0;     // per run, all PEs
  int64_t intra_node_bytes = 0;     // per run, all PEs
  int64_t flat_inter_node_bytes = 0;  // what the flat combine moves between nodes
};

// Throws InvalidArgument naming what the job cannot run: its options for the cluster's shape, an
// algorithm its op does not have, its iterations.
void validate(const MoeJob& job, int nodes, int ranks_per_node);

MoeReport run_moe_job(Pe& pe, const MoeJob& job);

}  // namespace symmesh
