// allgather-matmul (Ascend's AllGatherMatmul): gather_out = AllGather(A), C = gather_out x B.
//
// Each PE's shard of A (its rows) is cut into chunks of tile_m rows (main chunks and a tail)
// that the comm threads put into every peer's gather_out, chunk by chunk, each with a flag
// set to the run's number. Compute threads multiply the local shard first, while the first
// chunks are in flight, then each chunk as it lands: chunk by chunk, from the PE that sends to
// this one first (PE-1) round the ring, one tile_m x tile_n tile at a time.
//
// Cost per PE: M*N*K*2 flops; sends (n-1) * (M/n)*K*element bytes; one signal per chunk and
// peer.
#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/fused/operator.h"
#include "ops/fused/tiles.h"
#include "ops/fused/workers.h"

namespace symmesh {
namespace {

class AllgatherMatmul final : public FusedOperator {
 public:
  AllgatherMatmul(Pe& pe, Gemm& gemm, const FusedOptions& options)
      : pe_(pe),
        gemm_(gemm),
        o_(options),
        n_(pe.n_pes()),
        me_(pe.my_pe()),
        split_(split_rows(options.m, n_)),
        row_bytes_(size_t(options.k) * dtype_size(options.dtype)),
        max_chunks_((split_.rows_per_part + o_.tile_m - 1) / o_.tile_m) {
    gather_ = static_cast<std::byte*>(
        fused_workspace(pe, size_t(o_.m) * row_bytes_, "allgather-matmul gather_out (m x k)"));
    arrived_ = static_cast<uint64_t*>(fused_workspace(
        pe, size_t(n_) * max_chunks_ * sizeof(uint64_t), "allgather-matmul chunk flags"));
    // Work: the local shard's tiles, then chunk by chunk the other PEs' tiles, PE-1 first.
    const int64_t col_tiles = (o_.n + o_.tile_n - 1) / o_.tile_n;
    std::vector<Work> local;
    for (int64_t chunk = 0; chunk < max_chunks_; ++chunk) {
      for (int step = 0; step < n_; ++step) {
        const int source = (me_ - step + n_) % n_;
        if (chunk >= chunks(source)) continue;
        for (int64_t col = 0; col < col_tiles; ++col) {
          (source == me_ ? local : work_).push_back(Work{source, chunk, col});
        }
      }
    }
    work_.insert(work_.begin(), local.begin(), local.end());
  }

  ~AllgatherMatmul() override {
    pe_.free(arrived_);
    pe_.free(gather_);
  }

  RunFigures run(FusedTensors& t) override {
    const uint64_t run = ++runs_;
    const RunFigures figures = run_pipelined(
        pe_, o_, [&](int i) { return compute(t, run, i); },
        [&](int j, CommPort& port) { send(t, port, run, j); });
    std::memcpy(t.gather_out.data(), gather_, t.gather_out.size());  // the result, not timed
    return figures;
  }

 private:
  struct Work {
    int source;
    int64_t chunk;
    int64_t col_tile;
  };
  int64_t chunks(int source) const { return (split_.rows(source) + o_.tile_m - 1) / o_.tile_m; }
  int64_t chunk_row(int source, int64_t chunk) const {
    return split_.begin(source) + chunk * o_.tile_m;
  }
  int64_t chunk_rows(int source, int64_t chunk) const {
    return std::min(o_.tile_m, split_.end(source) - chunk_row(source, chunk));
  }
  uint64_t* flag(int source, int64_t chunk) const {
    return arrived_ + size_t(source) * max_chunks_ + chunk;
  }

  double compute(FusedTensors& t, uint64_t run, int thread) {
    GemmOperands operands{o_.dtype, nullptr, o_.k, t.b.data(), o_.n, o_.k, o_.tile_k};
    double busy = 0;
    for (size_t i = thread; i < work_.size(); i += o_.compute_threads) {
      const Work& w = work_[i];
      int64_t a_row0 = 0;
      if (w.source == me_) {
        operands.a = t.a.data();  // the local shard needs no gather
        a_row0 = split_.begin(me_);
      } else {
        pe_.signal_wait_until(
            flag(w.source, w.chunk), Cmp::kGe, run, pe_.deadline(),
            "chunk " + std::to_string(w.chunk) + " of PE " + std::to_string(w.source));
        operands.a = gather_;
      }
      Tile tile;
      tile.row = chunk_row(w.source, w.chunk);
      tile.rows = chunk_rows(w.source, w.chunk);
      tile.col = w.col_tile * o_.tile_n;
      tile.cols = std::min(o_.tile_n, o_.n - tile.col);
      const double begin = now_seconds();
      compute_tile(gemm_, operands, tile, a_row0, t.c.data() + tile.row * o_.n + tile.col, o_.n);
      busy += now_seconds() - begin;
    }
    return busy;
  }

  void send(FusedTensors& t, CommPort& port, uint64_t run, int thread) {
    if (thread == 0) {
      std::copy(t.a.begin(), t.a.end(), gather_ + split_.begin(me_) * row_bytes_);
    }
    for (int64_t chunk = 0; chunk < chunks(me_); ++chunk) {
      const size_t offset = size_t(chunk * o_.tile_m) * row_bytes_;
      const size_t bytes = size_t(chunk_rows(me_, chunk)) * row_bytes_;
      for (int step = 1; step < n_; ++step) {
        if ((step - 1) % o_.comm_threads != thread) continue;
        const int peer = (me_ + step) % n_;
        port.put_signal(gather_ + split_.begin(me_) * row_bytes_ + offset, t.a.data() + offset,
                        bytes, flag(me_, chunk), run, SignalOp::kSet, peer);
      }
    }
  }

  Pe& pe_;
  Gemm& gemm_;
  const FusedOptions o_;
  const int n_;
  const int me_;
  const RowSplit split_;
  const size_t row_bytes_;
  const int64_t max_chunks_;
  std::vector<Work> work_;       // compute order: local shard first
  std::byte* gather_ = nullptr;  // gather_out, m x k
  uint64_t* arrived_ = nullptr;  // [source][chunk]: the run whose chunk has landed
  uint64_t runs_ = 0;
};

}  // namespace

std::unique_ptr<FusedOperator> make_allgather_matmul(Pe& pe, Gemm& gemm,
                                                     const FusedOptions& options) {
  return std::make_unique<AllgatherMatmul>(pe, gemm, options);
}

}  // namespace symmesh
