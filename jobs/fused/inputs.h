// The operands of a fused job: generated from a seed (the default), or read from a directory
// of .npy files (A_<pe>.npy per PE, B.npy), checked for dtype and shape. Any PE can produce
// any PE's A, which is how the reference is computed without moving data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "jobs/inputs.h"
#include "ops/fused/options.h"

namespace symmesh {

// PE `pe`'s A: M x K (matmul-reduce-scatter, gemm-allreduce) or its rows x K
// (allgather-matmul), in the job's dtype.
std::vector<std::byte> input_a(const FusedOptions& options, int n_pes, int pe,
                               const InputSpec& spec);
// B: K x N.
std::vector<std::byte> input_b(const FusedOptions& options, const InputSpec& spec);
// The rows of PE `pe`'s A.
int64_t a_rows(const FusedOptions& options, int n_pes, int pe);

}  // namespace symmesh
