// Tile-level pieces of the comm epilogues: adding a received partial tile into an output, and
// copying a tile between layouts. Strided views: a tile is a pointer and a row stride.
#pragma once

#include <cstdint>

namespace symmesh {

// dst[r][c] += src[r][c] for r < rows, c < cols.
void add_tile(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows,
              int64_t cols);
// dst[r][c] = src[r][c].
void copy_tile(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows,
               int64_t cols);

}  // namespace symmesh
