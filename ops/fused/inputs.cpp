#include "ops/fused/inputs.h"

#include <cstring>

#include "ops/npy.h"
#include "ops/seeded.h"
#include "transport/errors.h"

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

std::vector<std::byte> load(const std::string& path, int64_t rows, int64_t cols, DType dtype) {
  NpyArray array = read_npy(path);
  if (array.rows != rows || array.cols != cols) {
    throw InvalidArgument(path + ": shape (" + std::to_string(array.rows) + ", " +
                          std::to_string(array.cols) + ") but the job needs (" +
                          std::to_string(rows) + ", " + std::to_string(cols) + ")");
  }
  const bool matches = (dtype == DType::kF32 && array.descr == "<f4") ||
                       (dtype == DType::kF16 && array.descr == "<f2") ||
                       (dtype == DType::kBF16 && (array.descr == "<u2" || array.descr == "|V2"));
  if (matches) return std::move(array.data);
  if (array.descr == "<f4") {  // f32 files feed any dtype, rounded to it
    std::vector<std::byte> out(size_t(rows) * cols * dtype_size(dtype));
    store_from_f32(out.data(), reinterpret_cast<const float*>(array.data.data()),
                   size_t(rows) * cols, dtype);
    return out;
  }
  throw InvalidArgument(path + ": dtype '" + array.descr + "' does not match --dtype " +
                        dtype_name(dtype) + " (allowed: '<f4', or '" +
                        (dtype == DType::kF16 ? "<f2" : "<u2' / '|V2") + "')");
}

}  // namespace

int64_t a_rows(const FusedOptions& o, int n_pes, int pe) {
  return o.op == FusedOp::kAllgatherMatmul ? split_rows(o.m, n_pes).rows(pe) : o.m;
}

std::vector<std::byte> input_a(const FusedOptions& o, int n_pes, int pe, const InputSpec& spec) {
  const int64_t rows = a_rows(o, n_pes, pe);
  if (spec.dir.empty()) return generate(spec.seed, uint64_t(pe) + 1, rows, o.k, o.dtype);
  return load(spec.dir + "/A_" + std::to_string(pe) + ".npy", rows, o.k, o.dtype);
}

std::vector<std::byte> input_b(const FusedOptions& o, const InputSpec& spec) {
  if (spec.dir.empty()) return generate(spec.seed, 0, o.k, o.n, o.dtype);
  return load(spec.dir + "/B.npy", o.k, o.n, o.dtype);
}

}  // namespace symmesh
