#include "ops/fused/tiles.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <thread>
#include <vector>

#include "common/cpu_binding.h"
#include "common/trace.h"
#include "ops/fused/workers.h"

namespace symmesh {

TileGrid::TileGrid(int64_t row0, int64_t nominal_rows, int64_t row_end, int64_t cols,
                   int64_t tile_m, int64_t tile_n)
    : row0_(row0),
      row_end_(std::min(row_end, row0 + nominal_rows)),
      cols_(cols),
      tile_m_(tile_m),
      tile_n_(tile_n),
      row_tiles_((nominal_rows + tile_m - 1) / tile_m),
      col_tiles_((cols + tile_n - 1) / tile_n) {}

Tile TileGrid::tile(int64_t index) const {
  const int64_t tile_row = index / col_tiles_;
  int64_t tile_col = index % col_tiles_;
  if (tile_row % 2 == 1) tile_col = col_tiles_ - 1 - tile_col;
  Tile t;
  t.row = row0_ + tile_row * tile_m_;
  t.col = tile_col * tile_n_;
  t.rows = std::max<int64_t>(0, std::min(tile_m_, row_end_ - t.row));
  t.cols = std::min(tile_n_, cols_ - t.col);
  return t;
}

void compute_tile(Gemm& gemm, const GemmOperands& op, const Tile& tile, int64_t a_row0, float* c,
                  int64_t ldc) {
  if (tile.rows == 0 || tile.cols == 0) return;
  const trace::Scope span("gemm tile", "compute");
  const size_t element = dtype_size(op.dtype);
  const int64_t step = op.tile_k > 0 ? std::min(op.tile_k, op.k) : op.k;
  for (int64_t k0 = 0; k0 < op.k; k0 += step) {
    const GemmShape shape{tile.rows, tile.cols, std::min(step, op.k - k0), op.lda, op.ldb, ldc};
    const std::byte* a = op.a + ((tile.row - a_row0) * op.lda + k0) * element;
    const std::byte* b = op.b + (k0 * op.ldb + tile.col) * element;
    gemm.multiply(shape, op.dtype, a, b, c, /*accumulate=*/k0 > 0);
  }
}

void multiply_tiled(Gemm& gemm, const GemmOperands& operands, int64_t m, int64_t n, int64_t tile_m,
                    int64_t tile_n, float* c, int threads) {
  const TileGrid grid(0, m, m, n, tile_m, tile_n);
  const trace::Context trace_context = trace::current();
  auto work = [&](int thread) {
    std::optional<trace::ThreadBinding> traced;  // the caller's own thread is bound already
    if (thread > 0) traced.emplace(trace_context, "gemm " + std::to_string(thread));
    set_gemm_threads(1);
    for (int64_t i = thread; i < grid.count(); i += threads) {
      const Tile tile = grid.tile(i);
      compute_tile(gemm, operands, tile, 0, c + tile.row * n + tile.col, n);
    }
  };
  std::vector<std::exception_ptr> helper_errors(size_t(std::max(threads, 1)));
  auto helper = [&](int thread) {
    try {
      work(thread);
    } catch (...) {
      helper_errors[thread] = std::current_exception();  // the caller rethrows it
    }
  };
  {
    std::vector<std::jthread> helpers;  // joined on every way out, a throwing tile included
    helpers.reserve(helper_errors.size());
    {
      const ScopedUnbound anywhere;  // the helpers share the daemon's CPUs, not the PE's one
      for (int thread = 1; thread < threads; ++thread) helpers.emplace_back(helper, thread);
    }
    work(0);
  }
  for (const std::exception_ptr& error : helper_errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace symmesh
