#include "runtime/collectives/dtype.h"

#include <immintrin.h>

#include <cstring>

#include "runtime/collectives/element_loops.h"

namespace symmesh {

using element_loops::combine;
using element_loops::load_block;
using element_loops::store_block;
using element_loops::with_loader;

size_t dtype_size(DType dtype) {
  return dtype == DType::kF32 ? 4 : 2;
}

#if defined(__clang__) && __clang_major__ < 15
// Clang 14 (the fuzzing build) has no x86 _Float16: the F16C instructions convert the same
// way (round to nearest even).
__attribute__((target("f16c"))) float f16_to_f32(uint16_t bits) {
  return _cvtsh_ss(bits);
}

__attribute__((target("f16c"))) uint16_t f32_to_f16(float value) {
  return _cvtss_sh(value, _MM_FROUND_TO_NEAREST_INT);
}
#else
float f16_to_f32(uint16_t bits) {
  _Float16 half;
  std::memcpy(&half, &bits, sizeof(half));
  return static_cast<float>(half);
}

uint16_t f32_to_f16(float value) {
  const _Float16 half = static_cast<_Float16>(value);
  uint16_t bits;
  std::memcpy(&bits, &half, sizeof(bits));
  return bits;
}
#endif

float load_one(const void* data, size_t index, DType dtype) {
  float value;
  load_f32(&value, static_cast<const std::byte*>(data) + index * dtype_size(dtype), 1, dtype);
  return value;
}

SYMMESH_VECTOR_CLONES void load_f32(float* out, const void* src, size_t count, DType dtype) {
  if (count == 0) return;  // empty blocks may come with null pointers
  load_block(out, src, count, dtype);
}

SYMMESH_VECTOR_CLONES void store_from_f32(void* dst, const float* in, size_t count, DType dtype) {
  if (count == 0) return;  // empty blocks may come with null pointers
  store_block(dst, in, count, dtype);
}

SYMMESH_VECTOR_CLONES void accumulate(float* acc, const void* src, size_t count, DType dtype,
                                      ReduceOp op) {
  if (count == 0) return;  // empty blocks may come with null pointers
  with_loader(src, dtype, [&](auto load) { combine(acc, count, op, load); });
}

SYMMESH_VECTOR_CLONES void combine_f32(float* dst, const float* a, const float* b, size_t count,
                                       ReduceOp op) {
  if (op == ReduceOp::kSum) {  // the common case, kept simple enough to vectorize
    for (size_t i = 0; i < count; ++i) dst[i] = a[i] + b[i];
  } else {
    for (size_t i = 0; i < count; ++i) dst[i] = reduce_pair(a[i], b[i], op);
  }
}

}  // namespace symmesh
