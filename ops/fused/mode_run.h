// One mode of a fused operator (the pipeline or its sequential baseline) with its own tensors,
// warmed up when built, and the figures of each measured run, each the slowest PE's (so every PE
// holds the same numbers). The job runner alternates two of them; a session plans with them.
#pragma once

#include <memory>
#include <vector>

#include "ops/fused/operator.h"

namespace symmesh {

struct ModeRun {
  const char* name;  // of its spans in a job trace
  std::unique_ptr<FusedOperator> op;
  FusedTensors tensors;
  std::vector<float> first;  // the warm-up's output, which every run must equal bitwise
  std::vector<double> total, compute, comm, comm_cpu;
  uint64_t wire_bytes = 0;
  double flops = 0;
  bool deterministic = true;

  // Collective: the warm-up run (primitives created, pages touched).
  ModeRun(const char* mode_name, std::unique_ptr<FusedOperator> mode, const FusedOptions& options,
          const Pe& pe, FusedTensors inputs);
  // Collective: one timed run.
  void measure(Pe& pe);
};

}  // namespace symmesh
