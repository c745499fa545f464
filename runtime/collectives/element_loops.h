// The element loops shared by the conversions (dtype.cpp) and the row reductions
// (reduce_kernels.cpp): inline, for files built at -O3 with no fused multiply-add.
#pragma once

#include <cstring>

#include "runtime/collectives/dtype.h"

// The element loops below are written once and compiled once per instruction set: each public
// entry point is cloned for AVX-512, AVX2 and the x86-64 baseline, and the loader picks the
// clone this CPU runs best when the program starts (GCC's target_clones, an ifunc). The
// kernels they call are inlined into each clone (flatten), so a whole reduction runs at one width.
// Elementwise loops with no contraction (-ffp-contract=off) give the same bits at every width.
// ThreadSanitizer builds get no clones: the loader runs an ifunc's resolver before the
// sanitizer's runtime has started, and the instrumented resolver crashes the program at load.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define SYMMESH_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default"), flatten))
#else
#define SYMMESH_VECTOR_CLONES
#endif

namespace symmesh::element_loops {

inline void load_block(float* out, const void* src, size_t count, DType dtype) {
  const auto* half = static_cast<const uint16_t*>(src);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(out, src, count * sizeof(float));
      break;
    case DType::kBF16:
      for (size_t i = 0; i < count; ++i) out[i] = bf16_to_f32(half[i]);
      break;
    case DType::kF16:
      for (size_t i = 0; i < count; ++i) out[i] = f16_to_f32(half[i]);
      break;
  }
}

inline void store_block(void* dst, const float* in, size_t count, DType dtype) {
  auto* half = static_cast<uint16_t*>(dst);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, in, count * sizeof(float));
      break;
    case DType::kBF16:
      for (size_t i = 0; i < count; ++i) half[i] = f32_to_bf16(in[i]);
      break;
    case DType::kF16:
      for (size_t i = 0; i < count; ++i) half[i] = f32_to_f16(in[i]);
      break;
  }
}

// Calls body(load) with the element loader of `src` in `dtype`, so each loop is compiled per type.
template <class Body>
inline void with_loader(const void* src, DType dtype, Body body) {
  const auto* f32 = static_cast<const float*>(src);
  const auto* half = static_cast<const uint16_t*>(src);
  switch (dtype) {
    case DType::kF32:
      body([f32](size_t i) { return f32[i]; });
      break;
    case DType::kBF16:
      body([half](size_t i) { return bf16_to_f32(half[i]); });
      break;
    case DType::kF16:
      body([half](size_t i) { return f16_to_f32(half[i]); });
      break;
  }
}

template <class Load>
inline void combine(float* acc, size_t count, ReduceOp op, Load load) {
  if (op == ReduceOp::kSum) {  // the common case, kept simple enough to vectorize
    for (size_t i = 0; i < count; ++i) acc[i] += load(i);
  } else {
    for (size_t i = 0; i < count; ++i) acc[i] = reduce_pair(acc[i], load(i), op);
  }
}

}  // namespace symmesh::element_loops
