// weighted_group_sum() for the low-latency MoE combine's case, bf16 rows into a bf16 row, written
// for AVX-512 by hand. The portable loops keep each block's f32 sums in memory and store and
// reload them for every row; this kernel keeps a chunk's sums in registers across all its rows
// (measured on the combine's pattern, 256 records of 4 rows of 7168: 0.66-0.90x their time).
#pragma once

#include <cstddef>

#include "runtime/collectives/dtype.h"
#include "runtime/collectives/reduce_kernels.h"

namespace symmesh {

// dst = weighted_group_sum(dst, kBF16, rows, group_ends, groups, count), with the same bits
// (a NaN's sign and payload aside, as between that loop's own builds), when this CPU has
// AVX-512 and every row is bf16; otherwise false, and nothing is written.
bool bf16_weighted_group_sum(void* dst, const WeightedRow* rows, const size_t* group_ends,
                             size_t groups, size_t count);

}  // namespace symmesh
