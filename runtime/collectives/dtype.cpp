#include "runtime/collectives/dtype.h"

#include <immintrin.h>
#include <algorithm>

#include <cstring>
#include <type_traits>

#include "runtime/collectives/bf16_weighted_sum.h"

namespace symmesh {

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

namespace {

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

// The row loops of reduce_rows and weighted_group_sum visit each row a block at a time, turn
// about between the rows, and do arithmetic on every element they load. Rows that come from
// memory, not the cache, then wait for each line in turn: the hardware's prefetcher sees a
// new short stream at every visit, and the loads do not overlap the sums (measured on the
// MoE combine's pattern: a pass over cold rows took as long as reading them plus summing them
// in cache). So each visit also asks for the same row's next block, a cache line for each
// line it reads, one visit before it is summed. A row in the cache pays a prefetch instruction
// per line.
// A block: 2 KiB per f32 buffer (weighted_group_sum has two). A chunk: the elements per round
// of prefetches, two lines of bf16 or f16, four of f32 (32 elements cost more in loop overhead
// on rows in the cache, and no less on rows in memory).
constexpr size_t kRowBlock = 512;
constexpr size_t kPrefetchChunk = 64;

// body(from, length) over [0, n) in chunks, `length` a compile-time constant for whole chunks
// (so their loops have no remainder); before each chunk, the line(s) at the same place one
// block further on in `row` (of `row_length` elements of `element` bytes, this block starting
// at `block_begin`), as far as the row goes.
template <class Body>
inline void with_next_block_fetched(const void* row, size_t element, size_t block_begin, size_t n,
                                    size_t row_length, Body body) {
  const auto* bytes = static_cast<const char*>(row);
  const size_t row_bytes = row_length * element;
  size_t c = 0;
  for (; c + kPrefetchChunk <= n; c += kPrefetchChunk) {
    const size_t ahead = (block_begin + c + kRowBlock) * element;
    const size_t end = std::min(row_bytes, ahead + kPrefetchChunk * element);
    for (size_t at = ahead; at < end; at += 64) __builtin_prefetch(bytes + at);
    body(c, std::integral_constant<size_t, kPrefetchChunk>{});
  }
  if (c < n) body(c, n - c);
}

// body(load, from, length) over the block [begin, begin + n) of `row` (`row_length` elements
// in `dtype`), chunk by chunk with the next block fetched: load(i) is the block's element i as
// f32, chosen once for the row's type.
template <class Body>
inline void visit_row_block(const void* row, DType dtype, size_t begin, size_t n, size_t row_length,
                            Body body) {
  const size_t element = dtype_size(dtype);
  with_loader(static_cast<const std::byte*>(row) + begin * element, dtype, [&](auto load) {
    with_next_block_fetched(row, element, begin, n, row_length,
                            [&](size_t from, auto length) { body(load, from, length); });
  });
}

}  // namespace

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

SYMMESH_VECTOR_CLONES void reduce_rows(void* dst, DType dtype, const TypedRow* rows,
                                       size_t row_count, size_t count, ReduceOp op) {
  if (count == 0) return;
  if (row_count == 1 && rows[0].dtype == dtype) {
    std::memcpy(dst, rows[0].data, count * dtype_size(dtype));
    return;
  }
  float acc[kRowBlock];
  for (size_t begin = 0; begin < count; begin += kRowBlock) {
    const size_t n = std::min(kRowBlock, count - begin);
    if (row_count == 0) std::fill(acc, acc + n, 0.0f);
    for (size_t r = 0; r < row_count; ++r) {
      visit_row_block(rows[r].data, rows[r].dtype, begin, n, count,
                      [&](auto load, size_t from, auto length) {
                        if (r == 0) {
                          for (size_t i = from; i < from + length; ++i) acc[i] = load(i);
                        } else {
                          combine(acc + from, length, op, [&](size_t i) { return load(from + i); });
                        }
                      });
    }
    store_block(static_cast<std::byte*>(dst) + begin * dtype_size(dtype), acc, n, dtype);
  }
}

SYMMESH_VECTOR_CLONES void weighted_group_sum(void* dst, DType dtype, const WeightedRow* rows,
                                              const size_t* group_ends, size_t groups,
                                              size_t count) {
  if (dtype == DType::kBF16 && bf16_weighted_group_sum(dst, rows, group_ends, groups, count))
    return;
  float acc[kRowBlock], group[kRowBlock];
  for (size_t begin = 0; begin < count; begin += kRowBlock) {
    const size_t n = std::min(kRowBlock, count - begin);
    bool summed = false;  // acc holds a group's sum
    for (size_t g = 0, first = 0; g < groups; first = group_ends[g++]) {
      if (group_ends[g] == first) continue;  // an empty group adds nothing
      float* sum = summed ? group : acc;
      for (size_t r = first; r < group_ends[g]; ++r) {
        const float weight = rows[r].weight;
        visit_row_block(rows[r].data, rows[r].dtype, begin, n, count,
                        [&](auto load, size_t from, auto length) {
                          if (r == first) {
                            for (size_t i = from; i < from + length; ++i) sum[i] = weight * load(i);
                          } else {
                            for (size_t i = from; i < from + length; ++i)
                              sum[i] += weight * load(i);
                          }
                        });
      }
      if (summed) combine(acc, n, ReduceOp::kSum, [&](size_t i) { return group[i]; });
      summed = true;
    }
    if (!summed) std::fill(acc, acc + n, 0.0f);
    store_block(static_cast<std::byte*>(dst) + begin * dtype_size(dtype), acc, n, dtype);
  }
}

}  // namespace symmesh
