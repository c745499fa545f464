#include "jobs/fused/inputs.h"

#include "ops/seeded.h"

namespace symmesh {
namespace {

// Uniform in [-1, 1), rounded to the dtype.
std::vector<std::byte> generate(uint64_t seed, uint64_t matrix, int64_t rows, int64_t cols,
                                DType dtype) {
  std::vector<float> values(size_t(rows) * cols);
  const uint64_t base = splitmix64(seed * 1000003 + matrix);
  for (size_t i = 0; i < values.size(); ++i) {
    values[i] = plus_minus_one(splitmix64(base + i));
  }
  std::vector<std::byte> out(values.size() * dtype_size(dtype));
  store_from_f32(out.data(), values.data(), values.size(), dtype);
  return out;
}

}  // namespace

int64_t a_rows(const FusedOptions& o, int n_pes, int pe) {
  return o.op == FusedOp::kAllgatherMatmul ? split_rows(o.m, n_pes).rows(pe) : o.m;
}

std::vector<std::byte> input_a(const FusedOptions& o, int n_pes, int pe, const InputSpec& spec) {
  const int64_t rows = a_rows(o, n_pes, pe);
  if (spec.dir.empty()) return generate(spec.seed, uint64_t(pe) + 1, rows, o.k, o.dtype);
  return load_matrix(spec.dir + "/A_" + std::to_string(pe) + ".npy", rows, o.k, o.dtype);
}

std::vector<std::byte> input_b(const FusedOptions& o, const InputSpec& spec) {
  if (spec.dir.empty()) return generate(spec.seed, 0, o.k, o.n, o.dtype);
  return load_matrix(spec.dir + "/B.npy", o.k, o.n, o.dtype);
}

}  // namespace symmesh
