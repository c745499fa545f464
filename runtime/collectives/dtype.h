// Element types of the collectives and their conversions. 16-bit types are reduced in f32:
// loaded into an f32 accumulator, combined there, and rounded once (to nearest even) at the end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace symmesh {

// Their values are wire::DataType's and wire::Reduction's, whose words (f32, bf16, f16; sum,
// max, min) they take (runtime/enum_words.h).
enum class DType { kF32 = 1, kBF16 = 2, kF16 = 3 };
enum class ReduceOp { kSum = 1, kMax = 2, kMin = 3 };

size_t dtype_size(DType dtype);
// a (op) b.
inline float reduce_pair(float a, float b, ReduceOp op) {
  return op == ReduceOp::kSum ? a + b : op == ReduceOp::kMax ? (a < b ? b : a) : (b < a ? b : a);
}

// out[i] = src[i] as f32.
void load_f32(float* out, const void* src, size_t count, DType dtype);
// data[index] as f32.
float load_one(const void* data, size_t index, DType dtype);
// dst[i] = in[i] rounded to `dtype`.
void store_from_f32(void* dst, const float* in, size_t count, DType dtype);
// acc[i] = acc[i] (op) src[i], src in `dtype` (f32 for partial sums).
void accumulate(float* acc, const void* src, size_t count, DType dtype, ReduceOp op);

// dst[i] = a[i] (op) b[i], all f32, in one pass: each input read once, dst written once (dst
// may be a or b).
void combine_f32(float* dst, const float* a, const float* b, size_t count, ReduceOp op);

// Inline: callers convert an element at a time in their own loops.
inline float bf16_to_f32(uint16_t bits) {
  const uint32_t word = uint32_t(bits) << 16;
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

inline uint16_t f32_to_bf16(float value) {
  uint32_t word;
  std::memcpy(&word, &value, sizeof(word));
  if ((word & 0x7fffffffu) > 0x7f800000u) return uint16_t((word >> 16) | 0x40);  // quiet NaN
  word += 0x7fffu + ((word >> 16) & 1u);  // round to nearest even
  return uint16_t(word >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

}  // namespace symmesh
