// matmul-reduce-scatter (CATCOC's Matmul-ReduceScatter): D_r = rows r of sum_i A_i x B.
//
// Every PE computes the tiles of all ranks' row bands of A_i x B, `comm_interval` tiles per
// destination rank per round. Tiles for this PE go straight into D; tiles for rank t go into
// slot [stage][t] of a symmetric workspace of `stages` stages (round g uses stage g % stages).
// The compute threads take a round's items (a destination rank's tile) in turn, dealt on from
// where the last round stopped. When a round is computed, the comm thread hands it over: pull, the
// owner reads its slot from every producer's workspace (RDMA READ / tcp get); push, the producer
// writes it into the owner's inbox. The owner adds the partials into D in rank order (fixed, so
// bitwise deterministic) and tells the producer it is done with that stage use; a producer waits
// for that before it overwrites the stage. Stage flags hold epochs (the count of uses of the
// stage), so they never need resetting between runs.
//
// Cost per PE: M*N*K*2 flops; (n-1)/n * M*N*4 bytes received (f32 partials, edge tiles sent
// whole); 2 signals per (round, peer).
#include <algorithm>
#include <vector>

#include "ops/fused/epilogue.h"
#include "ops/fused/operator.h"
#include "ops/fused/tiles.h"
#include "ops/fused/workers.h"

namespace symmesh {
namespace {

class MatmulReduceScatter final : public FusedOperator {
 public:
  MatmulReduceScatter(Pe& pe, Gemm& gemm, const FusedOptions& options)
      : pe_(pe),
        gemm_(gemm),
        o_(options),
        n_(pe.n_pes()),
        me_(pe.my_pe()),
        split_(split_rows(options.m, n_)),
        tiles_per_rank_(grid(0).count()),
        rounds_((tiles_per_rank_ + o_.comm_interval - 1) / o_.comm_interval),
        tile_floats_(size_t(o_.tile_m * o_.tile_n)),
        slot_floats_(size_t(o_.comm_interval) * tile_floats_),
        stage_floats_(size_t(n_) * slot_floats_),
        compute_done_(new LocalCounter[o_.stages]),
        stage_pushed_(new LocalCounter[o_.stages]) {
    const size_t stage_bytes = size_t(o_.stages) * stage_floats_ * sizeof(float);
    const std::string shape = "stages x ranks x comm_interval x tile_m x tile_n f32";
    workspace_ = static_cast<float*>(
        fused_workspace(pe, stage_bytes, "matmul-reduce-scatter workspace (" + shape + ")"));
    if (o_.transfer == StageTransfer::kPush) {
      inbox_ = static_cast<float*>(
          fused_workspace(pe, stage_bytes, "matmul-reduce-scatter inbox (" + shape + ")"));
    }
    const size_t flag_bytes = size_t(n_) * o_.stages * sizeof(uint64_t);
    ready_ = static_cast<uint64_t*>(fused_workspace(pe, flag_bytes, "stage flags"));
    consumed_ = static_cast<uint64_t*>(fused_workspace(pe, flag_bytes, "stage flags"));
  }

  ~MatmulReduceScatter() override {
    pe_.free(consumed_);
    pe_.free(ready_);
    if (inbox_) pe_.free(inbox_);
    pe_.free(workspace_);
  }

  RunFigures run(FusedTensors& t) override {
    const uint64_t first_round = uint64_t(runs_++) * rounds_;
    std::vector<std::vector<float>> scratch(o_.comm_threads);
    return run_pipelined(
        pe_, o_, [&](int i) { return compute(t, first_round, i); },
        [&](int j, CommPort& port) { communicate(t, port, first_round, j, scratch[j]); });
  }

 private:
  TileGrid grid(int rank) const {
    return TileGrid(split_.begin(rank), split_.rows_per_part, o_.m, o_.n, o_.tile_m, o_.tile_n);
  }
  int64_t round_tiles(int64_t round) const {
    return std::min<int64_t>(o_.comm_interval, tiles_per_rank_ - round * o_.comm_interval);
  }
  // Round g uses stage g % stages for the (g / stages + 1)-th time: that count is its epoch.
  int stage_of(uint64_t g) const { return int(g % o_.stages); }
  uint64_t epoch_of(uint64_t g) const { return g / o_.stages + 1; }
  uint64_t* flag(uint64_t* flags, int rank, int stage) const {
    return flags + size_t(rank) * o_.stages + stage;
  }
  float* slot(float* base, int stage, int rank) const {
    return base + size_t(stage) * stage_floats_ + size_t(rank) * slot_floats_;
  }

  double compute(FusedTensors& t, uint64_t first_round, int thread) {
    const GemmOperands operands{o_.dtype, t.a.data(), o_.k, t.b.data(), o_.n, o_.k, o_.tile_k};
    double busy = 0;
    for (int64_t round = 0; round < rounds_; ++round) {
      const uint64_t g = first_round + round;
      const int stage = stage_of(g);
      const uint64_t epoch = epoch_of(g);
      // The stage's previous use must be consumed by every owner before it is overwritten.
      if (o_.transfer == StageTransfer::kPull) {
        for (int target = 0; target < n_; ++target) {
          if (target == me_) continue;
          pe_.signal_wait_until(flag(consumed_, target, stage), Cmp::kGe, epoch - 1, pe_.deadline(),
                                "stage " + std::to_string(stage) + " consumed");
        }
      } else {
        stage_pushed_[stage].wait_at_least(epoch - 1, pe_, "stage pushed");
      }
      // The items are dealt to the threads in one sequence over the rounds, so a round with
      // fewer items than threads leaves none idle: the next round starts where it stopped.
      const int64_t count = round_tiles(round);
      const int64_t items = n_ * count;
      const int64_t threads = o_.compute_threads;
      const int64_t before = round * n_ * o_.comm_interval;  // the earlier rounds are all full
      for (int64_t item = ((thread - before) % threads + threads) % threads; item < items;
           item += threads) {
        const int target = (me_ + 1 + int(item / count)) % n_;  // this PE's own tiles last
        const int64_t in_round = item % count;
        const Tile tile = grid(target).tile(round * o_.comm_interval + in_round);
        const double begin = now_seconds();
        if (target == me_) {
          float* d = t.c.data() + (tile.row - split_.begin(me_)) * o_.n + tile.col;
          compute_tile(gemm_, operands, tile, 0, d, o_.n);
        } else {
          float* c = slot(workspace_, stage, target) + size_t(in_round) * tile_floats_;
          compute_tile(gemm_, operands, tile, 0, c, o_.tile_n);
        }
        busy += now_seconds() - begin;
      }
      compute_done_[stage].add(1, pe_.node().doorbell());
    }
    return busy;
  }

  void communicate(FusedTensors& t, CommPort& port, uint64_t first_round, int thread,
                   std::vector<float>& scratch) {
    const SignalOp set = SignalOp::kSet;
    for (int64_t round = thread; round < rounds_; round += o_.comm_threads) {
      const uint64_t g = first_round + round;
      const int stage = stage_of(g);
      const uint64_t epoch = epoch_of(g);
      const size_t bytes = size_t(round_tiles(round)) * tile_floats_ * sizeof(float);
      compute_done_[stage].wait_at_least(epoch * o_.compute_threads, pe_, "stage computed");
      for (int step = 1; step < n_; ++step) {
        const int target = (me_ + step) % n_;
        if (o_.transfer == StageTransfer::kPull) {
          port.signal_set(flag(ready_, me_, stage), epoch, target);
        } else {
          pe_.signal_wait_until(flag(consumed_, target, stage), Cmp::kGe, epoch - 1, pe_.deadline(),
                                "inbox stage " + std::to_string(stage) + " free");
          port.put_signal(slot(inbox_, stage, me_), slot(workspace_, stage, target), bytes,
                          flag(ready_, me_, stage), epoch, set, target);
        }
      }
      if (o_.transfer == StageTransfer::kPush)
        stage_pushed_[stage].set(epoch, pe_.node().doorbell());
      // Owner: add every producer's partials in rank order.
      for (int producer = 0; producer < n_; ++producer) {
        if (producer == me_) continue;
        pe_.signal_wait_until(
            flag(ready_, producer, stage), Cmp::kGe, epoch, pe_.deadline(),
            "stage " + std::to_string(stage) + " from PE " + std::to_string(producer));
        const float* partials = nullptr;
        if (o_.transfer == StageTransfer::kPull) {
          scratch.resize(slot_floats_);
          port.get(scratch.data(), slot(workspace_, stage, me_), bytes, producer);
          partials = scratch.data();
        } else {
          partials = slot(inbox_, stage, producer);  // push only: pull has no inbox
        }
        accumulate_round(t, round, partials);
        port.signal_set(flag(consumed_, me_, stage), epoch, producer);
      }
    }
  }

  void accumulate_round(FusedTensors& t, int64_t round, const float* partials) {
    const TileGrid mine = grid(me_);
    for (int64_t i = 0; i < round_tiles(round); ++i) {
      const Tile tile = mine.tile(round * o_.comm_interval + i);
      float* d = t.c.data() + (tile.row - split_.begin(me_)) * o_.n + tile.col;
      add_tile(d, o_.n, partials + size_t(i) * tile_floats_, o_.tile_n, tile.rows, tile.cols);
    }
  }

  Pe& pe_;
  Gemm& gemm_;
  const FusedOptions o_;
  const int n_;
  const int me_;
  const RowSplit split_;
  const int64_t tiles_per_rank_;
  const int64_t rounds_;
  const size_t tile_floats_;      // one tile slot: tile_m x tile_n
  const size_t slot_floats_;      // one destination's tiles of a round
  const size_t stage_floats_;     // one stage: a slot per rank
  float* workspace_ = nullptr;    // [stage][destination rank][tile of round]
  float* inbox_ = nullptr;        // push only: [stage][source rank][tile of round]
  uint64_t* ready_ = nullptr;     // [source][stage]: epoch whose partials are ready
  uint64_t* consumed_ = nullptr;  // [owner][stage]: epoch the owner has finished with
  std::unique_ptr<LocalCounter[]> compute_done_;  // per stage: compute threads' rounds done
  std::unique_ptr<LocalCounter[]> stage_pushed_;  // push, per stage: epoch pushed to owners
  uint64_t runs_ = 0;
};

}  // namespace

std::unique_ptr<FusedOperator> make_matmul_reduce_scatter(Pe& pe, Gemm& gemm,
                                                          const FusedOptions& options) {
  return std::make_unique<MatmulReduceScatter>(pe, gemm, options);
}

}  // namespace symmesh
