#include "runtime/collectives/reduce_kernels.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "runtime/collectives/bf16_weighted_sum.h"
#include "runtime/collectives/element_loops.h"

namespace symmesh {
namespace {

using element_loops::combine;
using element_loops::store_block;
using element_loops::with_loader;

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
