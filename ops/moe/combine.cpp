#include "ops/moe/combine.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <optional>
#include <span>

#include "common/trace.h"
#include "ops/moe/active_nodes.h"
#include "ops/roles/comm_port.h"
#include "ops/roles/roles.h"
#include "ops/roles/workspace.h"
#include "runtime/barrier.h"
#include "runtime/collectives/reduce_kernels.h"
#include "runtime/loan_scope.h"

namespace symmesh {
namespace {

float expert_factor(const MoeOptions& o, int32_t expert, float weight) {
  return expert_scale(expert) * (o.weighting == MoeWeighting::kTopk ? weight : 1.0f);
}

// out += expert k's output for received token i (its weight applied under topk weighting);
// x_f32 is the token as f32.
void add_expert_output(const MoeOptions& o, const DispatchResult& d, int64_t i, int k,
                       const float* x_f32, float* out) {
  const int32_t expert = d.topk_idx[size_t(i) * o.topk + k];
  const float factor = expert_factor(o, expert, d.topk_weights[size_t(i) * o.topk + k]);
  for (int64_t h = 0; h < o.hidden; ++h) out[h] += factor * x_f32[h];
}

// What every combine does last for a token: its partials (in `rows`), then the biases, summed
// in that order and rounded once into combined_x's type.
void finish_token(const MoeOptions& o, const std::vector<const void*>& biases, int64_t token,
                  std::vector<TypedRow>& rows, std::byte* out) {
  const size_t row_bytes = size_t(o.hidden) * dtype_size(o.x_dtype);
  for (const void* bias : biases) {
    rows.push_back({static_cast<const std::byte*>(bias) + size_t(token) * row_bytes, o.x_dtype});
  }
  reduce_rows(out, o.x_dtype, rows.data(), rows.size(), size_t(o.hidden));
}

class Combiner {
 public:
  Combiner(Pe& pe, const MoeOptions& o, const DispatchResult& d, const Routing& routing,
           const CombineInputs& inputs)
      : pe_(pe),
        o_(o),
        d_(d),
        routing_(routing),
        biases_(inputs.biases),
        n_(pe.n_pes()),
        nodes_(pe.node().nodes()),
        ranks_(pe.node().ranks_per_node()),
        me_(pe.my_pe()),
        my_node_(pe.my_node()),
        local_(pe.local_rank()),
        channels_(d.paths.channels),
        active_(pe, o),
        partial_bytes_(size_t(o.hidden) * dtype_size(o.partial_dtype)),
        out_bytes_(size_t(o.hidden) * dtype_size(o.x_dtype)) {
    if (inputs.out) {
      out_ = static_cast<std::byte*>(inputs.out);
    } else {
      result_.combined_x.assign(size_t(routing.tokens) * out_bytes_, std::byte{0});
      out_ = result_.combined_x.data();
    }
    result_.combined_topk_weights = routing.weights;
  }

  virtual ~Combiner() = default;

  CombineResult run() {
    CommPort port(pe_);
    barrier(pe_, active_.team());  // every region is allocated and zero, every PE's rows lent
    const double start = now_seconds();
    communicate(port);
    if (loan_) loan_->done_using();
    result_.seconds = now_seconds() - start;
    result_.inter_node_bytes = inter_bytes_.load();
    result_.intra_node_bytes = intra_bytes_.load();
    barrier(pe_, active_.team());  // no PE frees a region or its rows while a peer uses them
    if (loan_) loan_->complete();
    return std::move(result_);
  }

 protected:
  virtual void communicate(CommPort& port) = 0;

  void* zeroed(size_t bytes, const std::string& what) {
    void* address = symmetric_zeroed(pe_, bytes, what, kMoeShrink);
    allocations_.push_back(address);
    return address;
  }
  void release() {
    for (auto it = allocations_.rbegin(); it != allocations_.rend(); ++it) pe_.free(*it);
  }
  // Waits until ready(), a word PE `peer` writes, naming `what` (PE, channel, ring, head,
  // tail) if the deadline passes; the time it blocks counts as a wait for `peer`.
  template <class Ready, class Describe>
  void wait(int peer, Ready&& ready, Describe&& describe) {
    const BlockedOn counted(pe_.peer_waits(), peer);
    wait_until(
        pe_.node().doorbell(), pe_.deadline(), ready,
        [&] { return "PE " + std::to_string(me_) + ": combine: " + describe(); },
        pe_.node().wait_policy(), peer);
  }

  Pe& pe_;
  const MoeOptions& o_;
  const DispatchResult& d_;
  const Routing& routing_;
  const std::vector<const void*> biases_;
  const int n_, nodes_, ranks_, me_, my_node_, local_, channels_;
  const ActiveNodes active_;  // the nodes the dispatch left out send and receive nothing here
  const size_t partial_bytes_;
  const size_t out_bytes_;  // a row of combined_x
  CombineResult result_;
  std::byte* out_;  // [tokens][out_bytes_]: the caller's, or result_.combined_x's
  std::atomic<int64_t> inter_bytes_{0};  // channel threads add concurrently
  std::atomic<int64_t> intra_bytes_{0};
  std::vector<void*> allocations_;
  LoanScope* loan_ = nullptr;  // a derived combiner's: used up after communicate(), then complete
};

// DeepEP's hierarchical combine pipeline, per channel: forwarders (reading the node's partials
// where its PEs' experts wrote them), receivers.
class HierCombiner final : public Combiner {
 public:
  HierCombiner(Pe& pe, const MoeOptions& o, const DispatchResult& d, const Routing& routing,
               const CombineInputs& inputs)
      : Combiner(pe, o, d, routing, inputs) {
    if (!inputs.expert_rows) {
      owned_rows_ = expert_outputs(o, d);
      expert_out_ = owned_rows_.data();
    } else if (o.x_dtype == o.partial_dtype) {
      expert_out_ = static_cast<const std::byte*>(inputs.expert_rows);
    } else {  // the caller's rows, rounded to what partials travel in
      owned_rows_.resize(size_t(d.received) * partial_bytes_);
      std::vector<float> row(o.hidden);
      for (int64_t i = 0; i < d.received; ++i) {
        load_f32(row.data(),
                 static_cast<const std::byte*>(inputs.expert_rows) + size_t(i) * out_bytes_,
                 size_t(o.hidden), o.x_dtype);
        store_from_f32(&owned_rows_[size_t(i) * partial_bytes_], row.data(), size_t(o.hidden),
                       o.partial_dtype);
      }
      expert_out_ = owned_rows_.data();
    }
    // A ring per other node: a PE sums its own node's partials in place.
    if (nodes_ > 1) {
      const size_t rdma_slots = size_t(channels_) * (nodes_ - 1) * o.rdma_ring_tokens;
      rdma_ring_ = static_cast<std::byte*>(
          zeroed(rdma_slots * partial_bytes_,
                 "combine RDMA rings (channels x other nodes x rdma_ring_tokens)"));
    }
    rdma_tail_ = static_cast<uint64_t*>(zeroed(size_t(channels_) * nodes_ * 8, "RDMA tails"));
    rdma_head_ = static_cast<uint64_t*>(zeroed(size_t(channels_) * nodes_ * 8, "RDMA heads"));
    // The node's forwarders read this PE's rows where they are (run() opens with a barrier).
    loan_ = &lent_.emplace(
        pe_, std::span(const_cast<std::byte*>(expert_out_), size_t(d.received) * partial_bytes_));
  }
  ~HierCombiner() override { release(); }

 private:
  void communicate(CommPort& port) override {
    for (const LocalLoans::Borrowed& rows : lent_->borrow_all()) local_rows_.push_back(rows.memory);
    static const char* const kRoles[] = {"forward", "receive"};
    run_roles(
        pe_, 0, {}, 2 * channels_,
        [&](int role) {
          const int channel = role / 2;
          const trace::Scope span(kRoles[role % 2], "role");
          if (role % 2 == 0) forward(port, channel);
          if (role % 2 == 1) receive(port, channel);
        },
        [](int role) { return std::string(kRoles[role % 2]) + " ch" + std::to_string(role / 2); });
  }

  // Slot `position` of the ring, in a PE of node `home`, that node `from` forwards into.
  std::byte* rdma_slot(int channel, int from, int home, uint64_t position) const {
    const int ring = from < home ? from : from - 1;  // the home node has no ring of its own
    return rdma_ring_ + ((size_t(channel) * (nodes_ - 1) + ring) * o_.rdma_ring_tokens +
                         position % o_.rdma_ring_tokens) *
                            partial_bytes_;
  }
  const int64_t* recv_prefix(int source) const {
    return &d_.paths.recv_prefix[size_t(source) * (channels_ + 1)];
  }

  // Local PE j's partial of the token it received at `index`, where j's experts wrote it.
  const std::byte* local_partial(int j, int64_t index) const {
    // The handle says where this PE's dispatch put the token in PE j's rows; j's rows are
    // shorter when the PEs combine different dispatches (or rows of another width).
    if (index < 0 || uint64_t(index) >= local_rows_[j].size() / partial_bytes_) {
      throw InvalidArgument("combine: this PE's dispatch handle puts a token at row " +
                            std::to_string(index) + " of local PE " +
                            std::to_string(my_node_ * ranks_ + j) + ", whose expert rows hold " +
                            std::to_string(local_rows_[j].size() / partial_bytes_) +
                            ": every PE must combine the same dispatch, rows of the same width");
    }
    return local_rows_[j].data() + size_t(index) * partial_bytes_;
  }
  // The partials of this node's PEs that got forwarder record `record`, in local-rank order;
  // `read_from_peers` counts the bytes of the other PEs'.
  void add_local_partials(int64_t record, std::vector<TypedRow>& rows,
                          int64_t& read_from_peers) const {
    const size_t records = d_.paths.nvl_slot.size() / size_t(ranks_);
    if (record < 0 || size_t(record) >= records) {
      throw InvalidArgument("combine: this PE's dispatch handle names forwarder record " +
                            std::to_string(record) + "; it holds " + std::to_string(records));
    }
    for (int j = 0; j < ranks_; ++j) {
      const int64_t received = d_.paths.nvl_slot[size_t(record) * ranks_ + j];
      if (received < 0) continue;
      rows.push_back({local_partial(j, received), o_.partial_dtype});
      if (j != local_) read_from_peers += int64_t(partial_bytes_);
    }
  }

  // Forwarder: per record it forwarded from another node, the local partials summed, to the
  // token's home PE.
  void forward(CommPort& port, int channel) {
    std::vector<TypedRow> rows;
    std::vector<std::byte> staging(size_t(o_.chunk_tokens) * partial_bytes_);
    int64_t read_from_peers = 0;
    for (int a = 0; a < nodes_; ++a) {
      if (a == my_node_) continue;  // this PE's own tokens: its receiver sums them in place
      const int home = a * ranks_ + local_;
      uint64_t* head = rdma_head_ + size_t(channel) * nodes_ + a;
      uint64_t sent = 0;
      int64_t staged = 0;
      uint64_t* tail = rdma_tail_ + size_t(channel) * nodes_ + my_node_;
      auto make_room = [&](int64_t count) {  // until the ring takes `count` records after sent
        if (int64_t(sent - pe_.signal_fetch(head)) + count <= o_.rdma_ring_tokens) return;
        wait(
            home,
            [&] { return int64_t(sent - pe_.signal_fetch(head)) + count <= o_.rdma_ring_tokens; },
            [&] {
              return "forwarder, channel " + std::to_string(channel) + ", RDMA ring to PE " +
                     std::to_string(home) + ": tail " + std::to_string(sent) + ", head " +
                     std::to_string(pe_.signal_fetch(head)) + ", capacity " +
                     std::to_string(o_.rdma_ring_tokens) + ", " + std::to_string(count) +
                     " waiting";
            });
      };
      auto flush = [&] {  // the staged records into the home PE's ring, tail after data
        if (staged == 0) return;
        make_room(staged);
        for (int64_t done = 0; done < staged;) {  // a wrap splits it in two
          const uint64_t position = sent + uint64_t(done);
          const int64_t run = std::min<int64_t>(
              staged - done, o_.rdma_ring_tokens - int64_t(position % o_.rdma_ring_tokens));
          const size_t bytes = size_t(run) * partial_bytes_;
          std::byte* data = staging.data() + size_t(done) * partial_bytes_;
          if (done + run == staged) {
            port.put_signal(rdma_slot(channel, my_node_, a, position), data, bytes, tail,
                            uint64_t(staged), SignalOp::kAdd, home);
          } else {
            port.put(rdma_slot(channel, my_node_, a, position), data, bytes, home);
          }
          inter_bytes_ += int64_t(bytes);
          done += run;
        }
        sent += uint64_t(staged);
        staged = 0;
      };
      const int64_t* prefix = &d_.paths.forward_prefix[size_t(a) * (channels_ + 1)];
      for (int64_t record = prefix[channel]; record < prefix[channel + 1]; ++record) {
        rows.clear();
        add_local_partials(record, rows, read_from_peers);
        reduce_rows(staging.data() + size_t(staged) * partial_bytes_, o_.partial_dtype, rows.data(),
                    rows.size(), size_t(o_.hidden));
        if (++staged == o_.chunk_tokens) flush();
      }
      flush();
    }
    intra_bytes_ += read_from_peers;
  }

  // Receiver: every own token of this channel, the partials of its nodes in node order; for its
  // own node, the node's PEs' partials themselves, in local-rank order, read in place.
  void receive(CommPort& port, int channel) {
    int64_t read_from_peers = 0;
    std::vector<uint64_t> consumed(nodes_, 0), returned(nodes_, 0);
    std::vector<TypedRow> rows;
    auto return_heads = [&](bool all) {
      for (int b = 0; b < nodes_; ++b) {
        if (consumed[b] == returned[b]) continue;
        if (!all && consumed[b] - returned[b] < uint64_t(o_.chunk_tokens)) continue;
        port.signal_set(rdma_head_ + size_t(channel) * nodes_ + my_node_, consumed[b],
                        b * ranks_ + local_);
        returned[b] = consumed[b];
      }
    };
    const TokenRange range = channel_tokens(routing_.tokens, channels_, channel);
    for (int64_t t = range.begin; t < range.end; ++t) {
      rows.clear();  // as in the forwarder: heads go back once the token is summed
      for (int b = 0; b < nodes_; ++b) {
        const int64_t record = d_.paths.rdma_slot[size_t(t) * nodes_ + b];
        if (record < 0) continue;
        if (b == my_node_) {
          add_local_partials(record, rows, read_from_peers);
          continue;
        }
        const uint64_t* tail = rdma_tail_ + size_t(channel) * nodes_ + b;
        if (pe_.signal_fetch(tail) <= consumed[b]) {
          return_heads(true);
          wait(
              b * ranks_ + local_,  // node b's forwarder
              [&] { return pe_.signal_fetch(tail) > consumed[b]; },
              [&] {
                return "receiver, channel " + std::to_string(channel) + ", RDMA ring from node " +
                       std::to_string(b) + ": head " + std::to_string(consumed[b]) + ", tail " +
                       std::to_string(pe_.signal_fetch(tail)) + ", capacity " +
                       std::to_string(o_.rdma_ring_tokens) + ", token " + std::to_string(t);
              });
        }
        rows.push_back({rdma_slot(channel, b, my_node_, consumed[b]), o_.partial_dtype});
      }
      finish_token(o_, biases_, t, rows, out_ + size_t(t) * out_bytes_);
      for (int b = 0; b < nodes_; ++b) {
        if (b != my_node_) consumed[b] += d_.paths.rdma_slot[size_t(t) * nodes_ + b] >= 0;
      }
      return_heads(false);
    }
    return_heads(true);
    intra_bytes_ += read_from_peers;
  }

  std::vector<std::byte> owned_rows_;      // the stand-in experts' rows, or converted ones
  const std::byte* expert_out_ = nullptr;  // [received][partial bytes]: lent to the node's PEs
  std::byte* rdma_ring_ = nullptr;         // [channel][other forwarding node][slot]: in the home PE
  uint64_t* rdma_tail_ = nullptr;          // [channel][forwarding node]: remote atomic adds
  uint64_t* rdma_head_ = nullptr;          // [channel][home node]: written by the home PE
  std::vector<std::span<std::byte>> local_rows_;  // per PE of this node: its lent rows
  // Last: destroyed first, so a failed call's lent rows outlive every forwarder's reads.
  std::optional<LoanScope> lent_;
};

// The baseline: every expert output straight to its token's home PE.
class FlatCombiner final : public Combiner {
 public:
  FlatCombiner(Pe& pe, const MoeOptions& o, const DispatchResult& d, const Routing& routing,
               const CombineInputs& inputs)
      : Combiner(pe, o, d, routing, inputs) {
    uint64_t most = routing.tokens;
    for (uint64_t v : pe.exchange(active_.team(), most)) most = std::max(most, v);
    if (most > uint64_t(kMaxMoeTokens)) {  // exchanged through the shared heap
      throw PeerError("flat combine: a PE's tokens (" + std::to_string(most) +
                      ") are more than a PE holds (" + std::to_string(kMaxMoeTokens) +
                      "): the shared heap was written by something other than a daemon");
    }
    slots_ = static_cast<std::byte*>(
        zeroed(most * o.topk * partial_bytes_ + 8, "flat combine slots (tokens x topk x hidden)"));
    arrived_ = static_cast<uint64_t*>(zeroed(8, "flat combine counter"));
    // Every expert output, computed before the timed part as the hierarchical combine does.
    std::vector<float> value(o.hidden), x(o.hidden);
    for (int64_t i = 0; i < d.received; ++i) {
      load_f32(x.data(), &d.x[size_t(i) * out_bytes_], size_t(o.hidden), o.x_dtype);
      for (int k = 0; k < o.topk; ++k) {
        const int32_t expert = d.topk_idx[size_t(i) * o.topk + k];
        if (expert < 0) continue;
        std::fill(value.begin(), value.end(), 0.0f);
        add_expert_output(o, d, i, k, x.data(), value.data());
        outputs_.resize(outputs_.size() + partial_bytes_);
        store_from_f32(outputs_.data() + outputs_.size() - partial_bytes_, value.data(),
                       size_t(o.hidden), o.partial_dtype);
        // From the dispatch's records in the shared heap: its slot must lie in `most` rows.
        if (uint64_t(d.sources[i].source_token) >= most) {
          throw PeerError("flat combine: received token " + std::to_string(i) + " names token " +
                          std::to_string(d.sources[i].source_token) +
                          " of its PE, past the most a PE holds here (" + std::to_string(most) +
                          "): the shared heap was written by something other than a daemon");
        }
        items_.push_back(Item{d.sources[i].source_pe, d.sources[i].source_token, k});
      }
    }
  }
  ~FlatCombiner() override { release(); }

 private:
  void communicate(CommPort& port) override {
    for (size_t item = 0; item < items_.size(); ++item) {
      const Item& it = items_[item];
      port.put_signal(slots_ + (size_t(it.token) * o_.topk + it.slot) * partial_bytes_,
                      outputs_.data() + item * partial_bytes_, partial_bytes_, arrived_, 1,
                      SignalOp::kAdd, it.home);
      if (it.home / ranks_ != my_node_) inter_bytes_ += int64_t(partial_bytes_);
      if (it.home / ranks_ == my_node_ && it.home != me_) intra_bytes_ += int64_t(partial_bytes_);
    }
    uint64_t expected = 0;
    for (int32_t expert : routing_.experts) expected += expert >= 0;
    pe_.signal_wait_until(arrived_, Cmp::kGe, expected, pe_.deadline(),
                          "flat combine: expert outputs for this PE's tokens");
    std::vector<TypedRow> rows;
    for (int64_t t = 0; t < routing_.tokens; ++t) {
      rows.clear();
      for (int k = 0; k < o_.topk; ++k) {
        if (routing_.expert(t, k) < 0) continue;
        rows.push_back({slots_ + (size_t(t) * o_.topk + k) * partial_bytes_, o_.partial_dtype});
      }
      finish_token(o_, biases_, t, rows, out_ + size_t(t) * out_bytes_);
    }
  }

  struct Item {  // an expert output: for which home PE, token and topk slot
    int home;
    int64_t token;
    int slot;
  };
  std::vector<Item> items_;
  std::vector<std::byte> outputs_;  // [item][partial bytes]
  std::byte* slots_ = nullptr;      // [token][topk slot]: one expert output each
  uint64_t* arrived_ = nullptr;     // expert outputs landed here
};

}  // namespace

float expert_scale(int expert) {
  return 1.0f + float(expert % 8) / 8.0f;
}

std::vector<std::byte> expert_outputs(const MoeOptions& o, const DispatchResult& d) {
  const size_t bytes = size_t(o.hidden) * dtype_size(o.partial_dtype);
  std::vector<std::byte> out(size_t(d.received) * bytes);
  const size_t x_bytes = size_t(o.hidden) * dtype_size(o.x_dtype);
  std::vector<float> value(o.hidden), x(o.hidden);
  for (int64_t i = 0; i < d.received; ++i) {
    load_f32(x.data(), &d.x[size_t(i) * x_bytes], size_t(o.hidden), o.x_dtype);
    std::fill(value.begin(), value.end(), 0.0f);
    for (int k = 0; k < o.topk; ++k) {
      if (d.topk_idx[size_t(i) * o.topk + k] >= 0)
        add_expert_output(o, d, i, k, x.data(), value.data());
    }
    store_from_f32(&out[size_t(i) * bytes], value.data(), size_t(o.hidden), o.partial_dtype);
  }
  return out;
}

CombineResult combine(Pe& pe, const MoeOptions& options, const DispatchResult& dispatched,
                      const Routing& routing, const CombineInputs& inputs) {
  validate(options, pe.node().nodes(), pe.node().ranks_per_node());
  if (options.algo == MoeAlgo::kFlat) {
    if (inputs.expert_rows) {
      throw InvalidArgument("the flat combine runs the stand-in experts only: use hier");
    }
    return FlatCombiner(pe, options, dispatched, routing, inputs).run();
  }
  return HierCombiner(pe, options, dispatched, routing, inputs).run();
}

CombineResult combine(Pe& pe, const MoeOptions& options, const DispatchResult& dispatched,
                      const Routing& routing, const std::vector<std::vector<uint16_t>>& biases) {
  CombineInputs inputs;
  for (const auto& bias : biases) {
    if (options.x_dtype != DType::kBF16 || bias.size() != size_t(routing.tokens) * options.hidden) {
      throw InvalidArgument("combine: a bias of PE " + std::to_string(pe.my_pe()) + " holds " +
                            std::to_string(bias.size()) + " values; tokens x hidden = " +
                            std::to_string(routing.tokens * options.hidden) + " bf16 values");
    }
    inputs.biases.push_back(bias.data());
  }
  return combine(pe, options, dispatched, routing, inputs);
}

}  // namespace symmesh
