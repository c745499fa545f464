#include "jobs/inputs.h"

#include "common/errors.h"
#include "ops/npy.h"
#include "runtime/enum_words.h"

namespace symmesh {

std::vector<std::byte> load_matrix(const std::string& path, int64_t rows, int64_t cols,
                                   DType dtype) {
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
  throw InvalidArgument(path + ": dtype '" + array.descr + "' does not match the job's " +
                        wire::word(dtype) + " (allowed: '<f4', or '" +
                        (dtype == DType::kF16 ? "<f2" : "<u2' / '|V2") + "')");
}

}  // namespace symmesh
