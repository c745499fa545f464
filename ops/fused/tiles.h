// The tile scheduler and the block-level compute piece every fused operator shares (CATCOC's
// Matmul-ReduceScatter's BlockScheduler and BlockMmad): a grid of tile_m x tile_n output tiles over
// a band of rows, visited in swizzled order, and one tile's GEMM over K in steps of tile_k.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/gemm.h"

namespace symmesh {

// One output tile: absolute first row and column, and its actual size (edge tiles are smaller;
// a tile past the band's last real row has rows == 0 and is skipped).
struct Tile {
  int64_t row = 0, col = 0;
  int64_t rows = 0, cols = 0;
};

// Tiles over rows [row0, row0 + nominal_rows) clipped at row_end, and columns [0, cols). Every
// PE's band has the same nominal height, so every PE's grid has the same tile count.
class TileGrid {
 public:
  TileGrid(int64_t row0, int64_t nominal_rows, int64_t row_end, int64_t cols, int64_t tile_m,
           int64_t tile_n);
  int64_t count() const { return row_tiles_ * col_tiles_; }
  int64_t row_tiles() const { return row_tiles_; }
  int64_t col_tiles() const { return col_tiles_; }
  int64_t tile_m() const { return tile_m_; }
  int64_t tile_n() const { return tile_n_; }
  // Tile `index` in swizzled order: row-major over tile rows, odd tile rows reversed, so
  // consecutive tiles share B's columns (PTO's GEMM + AllReduce's block swizzle).
  Tile tile(int64_t index) const;

 private:
  int64_t row0_, row_end_, cols_, tile_m_, tile_n_;
  int64_t row_tiles_, col_tiles_;
};

// A and B of C = A x B: row-major, A's row r at a + r * lda elements.
struct GemmOperands {
  DType dtype = DType::kF32;
  const std::byte* a = nullptr;
  int64_t lda = 0;
  const std::byte* b = nullptr;
  int64_t ldb = 0;
  int64_t k = 0;
  int64_t tile_k = 0;  // 0: all of K in one step
};

// c (f32, row stride ldc) = A[tile rows] x B[:, tile cols], accumulating over K in tile_k
// steps. `a_row0` is the absolute row that A's first row holds.
void compute_tile(Gemm& gemm, const GemmOperands& operands, const Tile& tile, int64_t a_row0,
                  float* c, int64_t ldc);

// C (m x n, row-major) = A x B over the whole problem: every tile of the grid, split over
// `threads` threads (one OpenMP thread each). The baselines' GEMM: the same kernels as the fused
// operators' tiles, so a speedup measures overlap, not a different GEMM (oneDNN runs gemm:jit on
// a whole large problem here, up to 20% slower than its brgemm tiles).
void multiply_tiled(Gemm& gemm, const GemmOperands& operands, int64_t m, int64_t n, int64_t tile_m,
                    int64_t tile_n, float* c, int threads);

}  // namespace symmesh
