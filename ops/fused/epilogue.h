// Tile-level pieces of the comm epilogues: adding a received partial tile into an output, and
// copying a tile between layouts. Strided views: a tile is a pointer and a row stride.
#pragma once

#include <cstdint>

#include "common/streaming_copy.h"

namespace symmesh {

// dst[r][c] += src[r][c] for r < rows, c < cols.
void add_tile(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows,
              int64_t cols);
// dst[r][c] = src[r][c], a row at a time through `copy` (streamed when the whole output passes
// the cache share; the caller fences).
void copy_tile(float* dst, int64_t ld_dst, const float* src, int64_t ld_src, int64_t rows,
               int64_t cols, const CopyInto& copy);

}  // namespace symmesh
