// gemm-allreduce (PTO's GEMM + AllReduce): C = sum_i A_i x B on every PE.
//
// Tiles of C are owned round-robin (tile t by PE t % n). Compute threads compute this PE's
// partial of every tile, owners PE+1, PE+2, ... first and this PE's own tiles last (Ascend's
// AllGatherMatmul's advice for MatmulAllReduce: the local block hides the last communication),
// into a local tile-major buffer, and enqueue each finished tile id into their own ready queue.
// Comm thread j drains queues j, j + comm_threads, ...: each tile is split into subtiles of
// subtile_m rows (by default one subtile per tile: every message costs its receiver wake-ups,
// which on a host whose cores all compute come out of the GEMM) and put into the owner's
// receive slot for this PE, bumping the owner's per-subtile ready counter (put_signal) and the
// summary doorbell of the owner's comm thread that all-gathers that subtile (reversed stripes,
// as in CATCOC's AllReduce). That thread, seeing the counter reach n, adds the n partials in
// rank order (fixed: bitwise deterministic), puts the sum to every other PE, starting at a peer
// rotated by the subtile id, and copies it into C while it is still in the cache. Each
// all-gathered subtile raises its own arrival counter, and one of the receiver's comm threads
// copies it into C as soon as it lands: C is complete when the last comm thread ends, with no
// pass over all of C after the GEMM (a PE that finishes its GEMM early unpacks what it has
// while the others still compute). Nothing reads C during the run, so when C passes the cache
// share (common/streaming_copy.h) it is written with streaming stores: its lines neither evict
// the GEMM's blocks nor are read in first. Counters only grow: a run's target is n x the run's
// number for the partials, the run's number for the sums.
//
// Cost per PE: M*N*K*2 flops; sends (n-1)/n * M*N*4 bytes of partials and (n-1)/n * M*N*4
// bytes of sums; 2 signals per (subtile, peer) and one per all-gathered subtile and peer;
// M*N*4 bytes copied into C, a subtile at a time.
#include <algorithm>
#include <vector>

#include "ops/fused/epilogue.h"
#include "ops/fused/operator.h"
#include "ops/fused/ready_queue.h"
#include "ops/fused/tiles.h"
#include "ops/fused/workers.h"

namespace symmesh {
namespace {

class GemmAllreduce final : public FusedOperator {
 public:
  GemmAllreduce(Pe& pe, Gemm& gemm, const FusedOptions& options)
      : pe_(pe),
        gemm_(gemm),
        o_(options),
        n_(pe.n_pes()),
        me_(pe.my_pe()),
        grid_(0, options.m, options.m, options.n, options.tile_m, options.tile_n),
        tile_floats_(size_t(o_.tile_m * o_.tile_n)),
        sub_m_(gemm_allreduce_subtile_m(options)),
        subs_per_tile_((o_.tile_m + sub_m_ - 1) / sub_m_),
        max_owned_((grid_.count() + n_ - 1) / n_),
        copy_c_(size_t(options.m * options.n) * sizeof(float)),
        partials_(size_t(grid_.count()) * tile_floats_, 0.0f) {
    const std::string tiles = "tiles x tile_m x tile_n f32";
    recv_ = static_cast<float*>(
        fused_workspace(pe, size_t(n_) * max_owned_ * tile_floats_ * sizeof(float),
                        "gemm-allreduce receive slots (ranks x owned " + tiles + ")"));
    reduced_ = static_cast<float*>(fused_workspace(
        pe, partials_.size() * sizeof(float), "gemm-allreduce reduced output (" + tiles + ")"));
    ready_ = static_cast<uint64_t*>(fused_workspace(
        pe, size_t(max_owned_ * subs_per_tile_) * sizeof(uint64_t), "subtile-ready counters"));
    summary_ = static_cast<uint64_t*>(
        fused_workspace(pe, size_t(o_.comm_threads) * sizeof(uint64_t), "summary doorbells"));
    arrived_ = static_cast<uint64_t*>(fused_workspace(
        pe, size_t(grid_.count() * subs_per_tile_) * sizeof(uint64_t), "subtile-arrival counters"));
    // Compute order: tiles of owner PE+1 first, this PE's last.
    for (int step = 1; step <= n_; ++step) {
      for (int64_t t = (me_ + step) % n_; t < grid_.count(); t += n_) order_.push_back(t);
    }
  }

  ~GemmAllreduce() override {
    pe_.free(arrived_);
    pe_.free(summary_);
    pe_.free(ready_);
    pe_.free(reduced_);
    pe_.free(recv_);
  }

  RunFigures run(FusedTensors& t) override {
    const uint64_t run = ++runs_;
    std::vector<std::unique_ptr<ReadyQueue>> queues;
    for (int i = 0; i < o_.compute_threads; ++i) {
      queues.push_back(std::make_unique<ReadyQueue>(tiles_of_thread(i) + 1));
    }
    return run_pipelined(
        pe_, o_, [&](int i) { return compute(t, *queues[i], i); },
        [&](int j, CommPort& port) { communicate(port, queues, t.c.data(), run, j); });
  }

 private:
  int64_t tiles_of_thread(int i) const {
    return (grid_.count() - i + o_.compute_threads - 1) / o_.compute_threads;
  }
  int64_t subtiles(int64_t tile) const { return (grid_.tile(tile).rows + sub_m_ - 1) / sub_m_; }
  // The owner's comm thread that all-gathers owner-local subtile `sid` (reversed stripes).
  int ag_thread(int64_t sid) const { return o_.comm_threads - 1 - int(sid % o_.comm_threads); }
  // A tile's values are packed in its slot, rows of its own width (an edge tile's narrower rows
  // carry no padding over the wire).
  size_t subtile_offset(int64_t tile, int64_t sub) const {
    return size_t(sub * sub_m_ * grid_.tile(tile).cols);
  }
  size_t subtile_bytes(int64_t tile, int64_t sub) const {
    return size_t(subtile_rows(tile, sub) * grid_.tile(tile).cols) * sizeof(float);
  }
  int64_t subtile_rows(int64_t tile, int64_t sub) const {
    return std::min(sub_m_, grid_.tile(tile).rows - sub * sub_m_);
  }
  // Subtile `sub` of `tile`'s sum, from `reduced_` into its place in C.
  void copy_into_c(float* c, int64_t tile, int64_t sub) const {
    const Tile tl = grid_.tile(tile);
    copy_tile(c + (tl.row + sub * sub_m_) * o_.n + tl.col, o_.n,
              reduced_ + size_t(tile) * tile_floats_ + subtile_offset(tile, sub), tl.cols,
              subtile_rows(tile, sub), tl.cols, copy_c_);
  }
  float* receive_slot(int source, int64_t owned_index) const {
    return recv_ + (size_t(source) * max_owned_ + owned_index) * tile_floats_;
  }

  double compute(FusedTensors& t, ReadyQueue& queue, int thread) {
    const GemmOperands operands{o_.dtype, t.a.data(), o_.k, t.b.data(), o_.n, o_.k, o_.tile_k};
    double busy = 0;
    for (size_t i = thread; i < order_.size(); i += o_.compute_threads) {
      const int64_t tile = order_[i];
      const double begin = now_seconds();
      compute_tile(gemm_, operands, grid_.tile(tile), 0,
                   partials_.data() + size_t(tile) * tile_floats_, grid_.tile(tile).cols);
      busy += now_seconds() - begin;
      queue.push(tile, pe_.node().doorbell(), pe_.deadline());
    }
    return busy;
  }

  // Reduce-scatter one finished tile into its owner.
  void send_partial(CommPort& port, int64_t tile) {
    const int owner = int(tile % n_);
    const int64_t owned = tile / n_;
    for (int64_t sub = 0; sub < subtiles(tile); ++sub) {
      const int64_t sid = owned * subs_per_tile_ + sub;
      if (owner != me_) {
        const size_t offset = subtile_offset(tile, sub);
        port.put_signal(receive_slot(me_, owned) + offset,
                        partials_.data() + size_t(tile) * tile_floats_ + offset,
                        subtile_bytes(tile, sub), ready_ + sid, 1, SignalOp::kAdd, owner);
      } else {
        port.signal_add(ready_ + sid, 1, owner);
      }
      port.signal_add(summary_ + ag_thread(sid), 1, owner);
    }
  }

  // Owner: the sum of the n partials of subtile `sid`, in rank order, to every PE and into C.
  void reduce_and_gather(CommPort& port, float* c, int64_t sid) {
    const int64_t owned = sid / subs_per_tile_;
    const int64_t sub = sid % subs_per_tile_;
    const int64_t tile = owned * n_ + me_;
    const size_t offset = subtile_offset(tile, sub);
    const size_t floats = subtile_bytes(tile, sub) / sizeof(float);
    float* sum = reduced_ + size_t(tile) * tile_floats_ + offset;
    for (int source = 0; source < n_; ++source) {
      const float* partial = source == me_ ? partials_.data() + size_t(tile) * tile_floats_ + offset
                                           : receive_slot(source, owned) + offset;
      if (source == 0) {
        std::copy(partial, partial + floats, sum);
      } else {
        add_tile(sum, 0, partial, 0, 1, int64_t(floats));
      }
    }
    for (int step = 0; step < n_ - 1; ++step) {
      const int peer = (me_ + 1 + int((sid + step) % (n_ - 1))) % n_;
      port.put_signal(sum, sum, floats * sizeof(float), arrived_ + tile * subs_per_tile_ + sub, 1,
                      SignalOp::kAdd, peer);
    }
    copy_into_c(c, tile, sub);
  }

  void communicate(CommPort& port, std::vector<std::unique_ptr<ReadyQueue>>& queues, float* c,
                   uint64_t run, int thread) {
    const StreamingFenceOnExit c_written;  // C's rows are in memory before the run ends
    std::vector<int> mine;                 // the queues this thread drains
    int64_t expected = 0, popped = 0;
    for (int q = thread; q < o_.compute_threads; q += o_.comm_threads) {
      mine.push_back(q);
      expected += tiles_of_thread(q);
    }
    std::vector<int64_t> pending;  // owner-local subtiles this thread all-gathers
    for (int64_t owned = 0; owned * n_ + me_ < grid_.count(); ++owned) {
      for (int64_t sub = 0; sub < subtiles(owned * n_ + me_); ++sub) {
        const int64_t sid = owned * subs_per_tile_ + sub;
        if (ag_thread(sid) == thread) pending.push_back(sid);
      }
    }
    // Other owners' subtiles (tile x subs + sub) this thread copies into C as they land, dealt
    // round-robin over the comm threads (every PE's incoming tiles share one residue mod n, so
    // dealing by tile id would leave threads idle).
    std::vector<int64_t> arriving;
    for (int64_t tile = 0, dealt = 0; tile < grid_.count(); ++tile) {
      if (tile % n_ == me_) continue;
      for (int64_t sub = 0; sub < subtiles(tile); ++sub) {
        if (dealt++ % o_.comm_threads == thread) arriving.push_back(tile * subs_per_tile_ + sub);
      }
    }
    const uint64_t full = run * uint64_t(n_);
    auto ready = [&](int64_t sid) { return pe_.signal_fetch(ready_ + sid) >= full; };
    auto arrived = [&](int64_t id) { return pe_.signal_fetch(arrived_ + id) >= run; };
    while (popped < expected || !pending.empty() || !arriving.empty()) {
      const uint64_t summary_seen = pe_.signal_fetch(summary_ + thread);
      bool progress = false;
      for (int q : mine) {
        for (int64_t tile; queues[q]->try_pop(tile); ++popped, progress = true) {
          send_partial(port, tile);
        }
      }
      for (auto it = pending.begin(); it != pending.end();) {
        if (!ready(*it)) {
          ++it;
          continue;
        }
        reduce_and_gather(port, c, *it);
        it = pending.erase(it);
        progress = true;
      }
      for (auto it = arriving.begin(); it != arriving.end();) {
        if (!arrived(*it)) {
          ++it;
          continue;
        }
        copy_into_c(c, *it / subs_per_tile_, *it % subs_per_tile_);
        it = arriving.erase(it);
        progress = true;
      }
      if (progress) continue;
      // Nothing to do: wait for a tile or the summary doorbell (or, should a subtile's
      // counter land after its doorbell, the counter itself).
      wait_until(
          pe_.node().doorbell(), pe_.deadline(),
          [&] {
            return pe_.signal_fetch(summary_ + thread) != summary_seen ||
                   std::any_of(mine.begin(), mine.end(),
                               [&](int q) { return queues[q]->ready(); }) ||
                   std::any_of(pending.begin(), pending.end(), ready) ||
                   std::any_of(arriving.begin(), arriving.end(), arrived);
          },
          [&] {
            std::string waiting = "PE " + std::to_string(me_) + ": gemm-allreduce comm thread " +
                                  std::to_string(thread) + ": " +
                                  std::to_string(expected - popped) + " tiles not yet computed, " +
                                  std::to_string(pending.size()) +
                                  " subtiles not yet reduced by all " + std::to_string(n_) +
                                  " ranks, " + std::to_string(arriving.size()) +
                                  " subtiles not yet all-gathered from their owners";
            if (!arriving.empty()) {
              const int64_t tile = arriving.front() / subs_per_tile_;
              waiting += " (the first: tile " + std::to_string(tile) + " of PE " +
                         std::to_string(tile % n_) + ")";
            }
            return waiting;
          },
          pe_.node().wait_policy());
    }
  }

  Pe& pe_;
  Gemm& gemm_;
  const FusedOptions o_;
  const int n_;
  const int me_;
  const TileGrid grid_;
  const size_t tile_floats_;
  const int64_t sub_m_;
  const int64_t subs_per_tile_;
  const int64_t max_owned_;
  const CopyInto copy_c_;        // streams when all of C passes the cache share
  std::vector<float> partials_;  // this PE's A_i x B, tile-major
  std::vector<int64_t> order_;   // compute order
  float* recv_ = nullptr;        // [source][owned tile]: partials sent to this owner
  float* reduced_ = nullptr;     // [tile]: the sums, tile-major
  uint64_t* ready_ = nullptr;    // [owned subtile]: partials added so far
  uint64_t* summary_ = nullptr;  // [comm thread]: the all-gather wake-up doorbells
  uint64_t* arrived_ = nullptr;  // [tile x subs + sub]: other owners' sums all-gathered here
  uint64_t runs_ = 0;
};

}  // namespace

std::unique_ptr<FusedOperator> make_gemm_allreduce(Pe& pe, Gemm& gemm,
                                                   const FusedOptions& options) {
  return std::make_unique<GemmAllreduce>(pe, gemm, options);
}

}  // namespace symmesh
