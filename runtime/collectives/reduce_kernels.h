// Reductions of many rows into one, a block at a time with no f32 row in memory: the MoE
// combine's weighted sums and the one-shot all-reduce's sum over the node's inputs. Built, as
// dtype.cpp, at -O3 with no fused multiply-add, once per instruction set.
#pragma once

#include <cstddef>

#include "runtime/collectives/dtype.h"

namespace symmesh {

// One term of reduce_rows(): `count` elements (the call's) in `dtype`.
struct TypedRow {
  const void* data;
  DType dtype;
};
// dst[i] = ((rows[0][i] (op) rows[1][i]) (op) ...) in f32, in the order given, rounded once to
// `dtype` (zero with no rows), in one pass a block at a time, with no f32 row in memory: each
// row is read once and dst written once. One row of dst's type is copied as it is (rounding it
// would not change it).
void reduce_rows(void* dst, DType dtype, const TypedRow* rows, size_t row_count, size_t count,
                 ReduceOp op = ReduceOp::kSum);

// One term of weighted_group_sum(): a row in `dtype` and the factor it is scaled by.
struct WeightedRow {
  const void* data;
  DType dtype;
  float weight;
};
// Rows in groups: group g is rows [group_ends[g - 1], group_ends[g]) (group 0 from row 0). Each
// group's weighted sum is (w0 * rows[0][i] + w1 * rows[1][i]) + ... in f32, in the order given,
// with no fused multiply-add (the same bits on every x86); dst[i] = (group 0's + group 1's) + ...
// in f32, in group order, rounded once to `dtype` (an empty group adds nothing; zero with no
// rows). One pass a block at a time, with no f32 row in memory: each row is read once and dst
// written once. The same bits as each group's weighted sum stored as an f32 row, then
// reduce_rows over those rows. bf16 rows into bf16 on a CPU with AVX-512 take a kernel of
// their own (bf16_weighted_sum.h), with the same bits. Where two NaNs meet, which one the sum
// keeps (its sign and payload) depends on the compiler's operand order, so a NaN result's bits
// are not specified beyond its being a quiet NaN. dst may be one of the rows; it must not
// otherwise overlap them.
void weighted_group_sum(void* dst, DType dtype, const WeightedRow* rows, const size_t* group_ends,
                        size_t groups, size_t count);

}  // namespace symmesh
