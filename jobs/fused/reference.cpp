#include "jobs/fused/reference.h"

#include <algorithm>
#include <cmath>

namespace symmesh {
namespace {

std::vector<float> to_f32(const std::vector<std::byte>& in, DType dtype, float& max_abs) {
  std::vector<float> out(in.size() / dtype_size(dtype));
  load_f32(out.data(), in.data(), out.size(), dtype);
  for (float v : out) max_abs = std::max(max_abs, std::fabs(v));
  return out;
}

}  // namespace

Reference reference_output(Gemm& gemm, const FusedOptions& o, int n_pes, int pe,
                           const InputSpec& spec) {
  Reference ref;
  float max_b = 0, max_a = 0;
  const std::vector<float> b = to_f32(input_b(o, spec), o.dtype, max_b);
  const RowSplit split = split_rows(o.m, n_pes);
  // Rows [row0, row0 + rows) of A_i x B, added into out in f32.
  auto add_product = [&](const std::vector<float>& a, int64_t a_row0, int64_t row0, int64_t rows,
                         float* out) {
    if (rows == 0) return;
    std::vector<float> product(size_t(rows) * o.n);
    gemm.multiply(GemmShape{rows, o.n, o.k, o.k, o.n, o.n}, DType::kF32,
                  a.data() + (row0 - a_row0) * o.k, b.data(), product.data(), false);
    for (size_t i = 0; i < product.size(); ++i) out[i] += product[i];
  };
  switch (o.op) {
    case FusedOp::kMatmulReduceScatter:
    case FusedOp::kGemmAllreduce: {
      const bool scattered = o.op == FusedOp::kMatmulReduceScatter;
      const int64_t row0 = scattered ? split.begin(pe) : 0;
      const int64_t rows = scattered ? split.rows(pe) : o.m;
      ref.c.assign(size_t(rows) * o.n, 0.0f);
      for (int source = 0; source < n_pes; ++source) {
        const auto a = to_f32(input_a(o, n_pes, source, spec), o.dtype, max_a);
        add_product(a, 0, row0, rows, ref.c.data());
      }
      break;
    }
    case FusedOp::kAllgatherMatmul:
      ref.c.assign(size_t(o.m) * o.n, 0.0f);
      for (int source = 0; source < n_pes; ++source) {
        const auto shard = input_a(o, n_pes, source, spec);
        ref.gather_out.insert(ref.gather_out.end(), shard.begin(), shard.end());
        const auto a = to_f32(shard, o.dtype, max_a);
        add_product(a, split.begin(source), split.begin(source), split.rows(source),
                    ref.c.data() + split.begin(source) * o.n);
      }
      break;
  }
  ref.max_abs_input_product = double(max_a) * double(max_b);
  return ref;
}

double tolerance(const FusedOptions& o, int n_pes, double max_abs_input_product) {
  const int terms = o.op == FusedOp::kAllgatherMatmul ? 1 : n_pes;
  // About 8 units of f32 rounding per accumulated term at the largest product: far above
  // reordering error, far below any wrong tile.
  return std::max(1e-6, 1e-6 * double(o.k) * terms * max_abs_input_product);
}

}  // namespace symmesh
