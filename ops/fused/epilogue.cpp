#include "ops/fused/epilogue.h"

#include <cstring>

namespace symmesh {

void add_tile(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows,
              int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    float* out = dst + r * ld_dst;
    const float* in = src + r * ld_src;
    for (int64_t c = 0; c < cols; ++c) out[c] += in[c];
  }
}

void copy_tile(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows,
               int64_t cols, const CopyInto& copy) {
  for (int64_t r = 0; r < rows; ++r) {
    copy(dst + r * ld_dst, src + r * ld_src, size_t(cols) * sizeof(float));
  }
}

}  // namespace symmesh
