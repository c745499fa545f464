// The reference a fused job is verified against: f32 math on every PE's inputs (converted
// exactly from their dtype), the sum over PEs taken in rank order. Independent of the tiles,
// threads and transports of the operator under test.
#pragma once

#include <cstddef>
#include <vector>

#include "jobs/fused/inputs.h"
#include "ops/gemm.h"

namespace symmesh {

struct Reference {
  std::vector<float> c;               // what the operator's c must hold on this PE
  std::vector<std::byte> gather_out;  // allgather-matmul: the concatenated shards
  double max_abs_input_product = 0;   // max|A| * max|B|, which scales the tolerance
};

Reference reference_output(Gemm& gemm, const FusedOptions& options, int n_pes, int pe,
                           const InputSpec& spec);

// The tolerance for |c - reference|: f32 accumulation of K products per PE over `n` PEs, in
// another order than the reference's.
double tolerance(const FusedOptions& options, int n_pes, double max_abs_input_product);

}  // namespace symmesh
