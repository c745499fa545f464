#include "ops/moe/dispatch.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <optional>
#include <span>

#include "common/streaming_copy.h"
#include "common/trace.h"
#include "ops/moe/active_nodes.h"
#include "ops/moe/record_counts.h"
#include "ops/pe_stats.h"
#include "ops/roles/comm_port.h"
#include "ops/roles/roles.h"
#include "ops/roles/workspace.h"
#include "runtime/barrier.h"
#include "runtime/loan_scope.h"

namespace symmesh {
namespace {

// A token on the wire: x, then its expert ids, weights and where it came from (the meta part).
// A receiver's region holds only meta parts: the rows go straight into its result.
struct RecordFormat {
  size_t x_bytes;  // hidden x the element's size
  int topk;
  size_t ids_bytes() const { return size_t(topk) * 4; }  // and the weights'
  // The meta part, from its start: ids, weights, then source (PE and token, two int32).
  size_t weights_in_meta() const { return ids_bytes(); }
  size_t source_in_meta() const { return 2 * ids_bytes(); }
  size_t meta_bytes() const { return source_in_meta() + 8; }
  size_t meta_stride() const { return (meta_bytes() + 15) / 16 * 16; }  // in a receive region
  size_t meta_at() const { return x_bytes; }                            // in a record
  size_t bytes() const { return (meta_at() + meta_bytes() + 15) / 16 * 16; }
};

// An exclusive prefix over [rows][columns] in row-major order: out[r][c] = the sum of every
// entry before (r, c); out has columns + 1 per row, the last the row's end.
std::vector<int64_t> prefix_rows(const uint64_t* counts, int rows, int columns) {
  std::vector<int64_t> out(size_t(rows) * (columns + 1));
  int64_t running = 0;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < columns; ++c) {
      out[size_t(r) * (columns + 1) + c] = running;
      running += int64_t(counts[size_t(r) * columns + c]);
    }
    out[size_t(r) * (columns + 1) + columns] = running;
  }
  return out;
}

// No token may go to a node the call leaves out: nothing would receive it. Checked before the
// call's team is made, so that after it a PE only waits or fails the whole call.
void check_routing_to_active(Pe& pe, const MoeOptions& o, const Routing& routing) {
  for (size_t slot = 0; slot < routing.experts.size(); ++slot) {
    const int32_t expert = routing.experts[slot];
    if (expert < 0 || expert >= o.experts) continue;  // the layout judges these
    const int node = pe.node_of(expert_pe(o, pe.n_pes(), expert));
    if (ActiveNodes::takes_part(o.active_nodes, node)) continue;
    throw InvalidArgument("dispatch: PE " + std::to_string(pe.my_pe()) + "'s token " +
                          std::to_string(slot / size_t(o.topk)) + " goes to expert " +
                          std::to_string(expert) + " on node " + std::to_string(node) +
                          ", which the active nodes leave out: mask the routing first (-1)");
  }
}

class Dispatcher {
 public:
  Dispatcher(Pe& pe, const MoeOptions& o, const std::byte* x, const Routing& routing,
             DispatchResult reuse, const PlaceDispatchRows& place_x)
      : pe_(pe),
        o_(o),
        x_(x),
        routing_(routing),
        tokens_(routing.tokens),
        shape_{pe.node().nodes(), pe.node().ranks_per_node()},
        n_(shape_.n_pes()),
        nodes_(shape_.nodes),
        ranks_(shape_.ranks_per_node),
        me_(pe.my_pe()),
        my_node_(pe.my_node()),
        local_(pe.local_rank()),
        channels_(o.channels),
        active_(pe, o),
        format_{size_t(o.hidden) * dtype_size(o.x_dtype), o.topk},
        layout_(dispatch_layout(routing, o, shape_)),
        place_x_(place_x),
        result_(std::move(reuse)) {}

  DispatchResult run() {
    {
      const trace::Scope span("notify", "role");
      notify();
    }
    allocate();
    CommPort port(pe_);
    result_.paths.rdma_slot.assign(size_t(tokens_) * nodes_, -1);
    result_.paths.nvl_slot.assign(size_t(forwarded_) * ranks_, -1);
    run_roles(  // writes into the node peers' rows: they wait for it if this throws
        pe_, 0, {}, channels_,
        [&](int channel) {
          const StreamingFenceOnExit fence;  // rows streamed into node peers, even on a throw
          {
            const trace::Scope span("send", "role");
            send(port, channel);
          }
          const trace::Scope span("forward", "role");
          forward(port, channel);
        },
        [](int channel) { return "channel " + std::to_string(channel); });
    loan_->done_using();
    const trace::Scope span("receive", "role");
    receive();
    barrier(pe_, active_.team());  // no PE frees a region or its rows while a forwarder writes
    loan_->complete();
    release();
    if (placing_failed_) std::rethrow_exception(placing_failed_);  // after the collective's end
    return std::move(result_);
  }

 private:
  // Step 1: tokens per (PE, channel) to each PE; per (node, channel) to the cross team.
  void notify() {
    const size_t pe_words = size_t(n_) * channels_;
    const size_t node_words = size_t(nodes_) * nodes_ * channels_;
    notify_pe_ = static_cast<uint64_t*>(
        symmetric_zeroed(pe_, pe_words * 8 + 8, "dispatch counts (PEs x channels)", kMoeShrink));
    notify_node_ = static_cast<uint64_t*>(symmetric_zeroed(
        pe_, node_words * 8 + 8, "dispatch counts (nodes x nodes x channels)", kMoeShrink));
    barrier(pe_, active_.team());
    std::vector<uint64_t> to_pe(pe_words, 0), to_node(size_t(nodes_) * channels_, 0);
    for (int c = 0; c < channels_; ++c) {
      const TokenRange range = channel_tokens(tokens_, channels_, c);
      for (int64_t t = range.begin; t < range.end; ++t) {
        for (int p = 0; p < n_; ++p) to_pe[size_t(p) * channels_ + c] += layout_.goes_to_pe(t, p);
        for (int b = 0; b < nodes_; ++b) {
          to_node[size_t(b) * channels_ + c] += layout_.goes_to_node(t, b);
        }
      }
    }
    uint64_t* pe_counter = notify_pe_ + pe_words;
    uint64_t* node_counter = notify_node_ + node_words;
    for (int p = 0; p < n_; ++p) {
      if (!active_.has(pe_.node_of(p))) continue;
      pe_.put_signal(notify_pe_ + size_t(me_) * channels_, &to_pe[size_t(p) * channels_],
                     size_t(channels_) * 8, pe_counter, 1, SignalOp::kAdd, p);
    }
    for (int b = 0; b < nodes_; ++b) {
      if (!active_.has(b)) continue;
      pe_.put_signal(notify_node_ + size_t(my_node_) * nodes_ * channels_, to_node.data(),
                     to_node.size() * 8, node_counter, 1, SignalOp::kAdd, b * ranks_ + local_);
    }
    pe_.signal_wait_until(pe_counter, Cmp::kGe, uint64_t(active_.pes()), pe_.deadline(),
                          "dispatch notify: counts from every PE taking part");
    pe_.signal_wait_until(node_counter, Cmp::kGe, uint64_t(active_.nodes()), pe_.deadline(),
                          "dispatch notify: counts from every node taking part");
    // From here on the counts are the copies, checked: this PE's own rows must be what it
    // sent itself.
    const std::vector<uint64_t> pe_counts = checked_counts(
        notify_pe_, pe_words, channels_, "dispatch notify: the counts from every PE");
    node_counts_ = checked_counts(notify_node_, node_words, channels_,
                                  "dispatch notify: the counts from every node");
    const auto own_pe = pe_counts.begin() + std::ptrdiff_t(size_t(me_) * channels_);
    const auto own_node = node_counts_.begin() + std::ptrdiff_t(size_t(my_node_) * to_node.size());
    if (!std::equal(own_pe, own_pe + channels_, to_pe.begin() + std::ptrdiff_t(me_ * channels_)) ||
        !std::equal(to_node.begin(), to_node.end(), own_node)) {
      throw PeerError(
          "dispatch notify: this PE's own counts in its shared heap changed while it waited: "
          "it was written by something other than a daemon");
    }
    // Receivers: [source PE][channel] prefix; forwarders: [source node][channel] prefix of
    // the records sent to this node.
    result_.paths.channels = channels_;
    result_.paths.recv_prefix = prefix_rows(pe_counts.data(), n_, channels_);
    std::vector<uint64_t> to_me(size_t(nodes_) * channels_);
    for (int a = 0; a < nodes_; ++a) {
      for (int c = 0; c < channels_; ++c)
        to_me[size_t(a) * channels_ + c] = node_count(a, my_node_, c);
    }
    result_.paths.forward_prefix = prefix_rows(to_me.data(), nodes_, channels_);
    received_ = result_.paths.recv_prefix.back();
    forwarded_ = result_.paths.forward_prefix.back();
    const int64_t* own = &result_.paths.forward_prefix[size_t(my_node_) * (channels_ + 1)];
    own_records_ = own[channels_] - own[0];
  }

  // Records PE (a, local_) sends to node b in channel c (every cross-team member knows).
  uint64_t node_count(int a, int b, int c) const {
    return node_counts_[(size_t(a) * nodes_ + b) * channels_ + c];
  }
  // Where (a, c)'s records start in node b's forwarder order (every node's records, node b's
  // own included: the index the handle keeps).
  int64_t forwarder_base(int a, int b, int c) const {
    int64_t base = 0;
    for (int a2 = 0; a2 < nodes_; ++a2) {
      for (int c2 = 0; c2 < channels_; ++c2) {
        if (a2 == a && c2 == c) return base;
        base += int64_t(node_count(a2, b, c2));
      }
    }
    return base;
  }
  // Where (a, c)'s records start in node b's forwarder region, which holds only the records
  // from other nodes (node b's own go straight to its receivers).
  int64_t region_base(int a, int b, int c) const {
    int64_t own = 0;
    if (a > b) {
      for (int c2 = 0; c2 < channels_; ++c2) own += int64_t(node_count(b, b, c2));
    }
    return forwarder_base(a, b, c) - own;
  }

  void allocate() {
    const size_t bytes = format_.bytes();
    const uint64_t most_forwarded =
        max_over(pe_, active_.team(), uint64_t(forwarded_ - own_records_));
    const uint64_t most_received = max_over(pe_, active_.team(), uint64_t(received_));
    // Read from the shared heap: checked before they size a region (at most every PE's tokens).
    const uint64_t most = uint64_t(n_) * uint64_t(kMaxMoeTokens);
    if (most_forwarded > most || most_received > most) {
      throw PeerError("dispatch: a PE's records to forward (" + std::to_string(most_forwarded) +
                      ") or to receive (" + std::to_string(most_received) +
                      ") are more than all PEs' tokens (" + std::to_string(most) +
                      "): the shared heap was written by something other than a daemon");
    }
    most_received_ = int64_t(most_received);
    // The regions hold records read only once their tail counts them: not cleared.
    forward_region_ = static_cast<std::byte*>(
        symmetric_region(pe_, most_forwarded * bytes,
                         "dispatch forwarder region (records x record bytes)", kMoeShrink));
    forward_tail_ = static_cast<uint64_t*>(symmetric_zeroed(
        pe_, size_t(nodes_) * channels_ * 8, "dispatch forwarder tails", kMoeShrink));
    recv_region_ = static_cast<std::byte*>(symmetric_region(
        pe_, most_received_ * format_.meta_stride(),
        "dispatch receive region (tokens x expert ids, weights and source)", kMoeShrink));
    recv_tail_ = static_cast<uint64_t*>(
        symmetric_zeroed(pe_, size_t(n_) * channels_ * 8, "dispatch receive tails", kMoeShrink));
    std::byte* rows = place_rows();
    loan_.emplace(pe_, std::span(rows, rows ? size_t(received_) * format_.x_bytes : 0),
                  rows == nullptr);
    barrier(pe_, active_.team());  // every region exists and is zero, every PE has its counts
    // The receive prefix and rows of every PE on this node.
    local_rows_ = loan_->borrow_all();
    for (const LocalLoans::Borrowed& rows : local_rows_) copy_row_.emplace_back(rows.memory.size());
    local_prefix_.resize(ranks_);
    for (int j = 0; j < ranks_; ++j) {
      const auto* counts = static_cast<const uint64_t*>(pe_.ptr(notify_pe_, my_node_ * ranks_ + j));
      local_prefix_[j] = prefix_rows(checked_counts(counts, size_t(n_) * channels_, channels_,
                                                    "dispatch: a node peer's counts")
                                         .data(),
                                     n_, channels_);
    }
  }

  // Room for this PE's received rows, where its node peers write them: the caller's, or the
  // result's storage; null when the caller could not place them (its peers then write none).
  std::byte* place_rows() {
    static std::byte no_rows;  // room for 0 rows, which is not "discard"
    const size_t bytes = size_t(received_) * format_.x_bytes;
    if (!place_x_) {
      result_.x.resize(bytes);
      return bytes > 0 ? result_.x.data() : &no_rows;
    }
    result_.x.clear();
    try {
      std::byte* rows = place_x_(received_);
      if (rows == nullptr && bytes > 0) {
        throw InvalidArgument("dispatch: no room was placed for " + std::to_string(received_) +
                              " received rows");
      }
      return bytes > 0 ? rows : &no_rows;
    } catch (...) {  // rethrown once this PE has done its part of the collective
      placing_failed_ = std::current_exception();
      return nullptr;
    }
  }

  void encode_meta(int64_t token, std::byte* meta) const {
    std::memcpy(meta, &routing_.experts[size_t(token) * o_.topk], format_.ids_bytes());
    std::memcpy(meta + format_.weights_in_meta(), &routing_.weights[size_t(token) * o_.topk],
                format_.ids_bytes());
    const int32_t source[2] = {me_, int32_t(token)};
    std::memcpy(meta + format_.source_in_meta(), source, 8);
  }
  const std::byte* token_x(int64_t token) const { return x_ + size_t(token) * format_.x_bytes; }
  void encode(int64_t token, std::byte* record) const {
    std::memcpy(record, token_x(token), format_.x_bytes);
    encode_meta(token, record + format_.meta_at());
  }

  // [begin, end) of `source`'s tokens in `channel` among local PE j's received ones.
  const int64_t* counted(int source, int channel, int j) const {
    return &local_prefix_[j][size_t(source) * (channels_ + 1) + channel];
  }
  [[noreturn]] void miscounted(int source, int channel, int j, const std::string& found) const {
    const int64_t* span = counted(source, channel, j);
    throw PeerError("dispatch channel " + std::to_string(channel) + ": PE " +
                    std::to_string(source) + "'s records name PE " +
                    std::to_string(my_node_ * ranks_ + j) + " " + found +
                    " times; its counts said " + std::to_string(span[1] - span[0]));
  }

  // Record `record` of this node's forwarder order, from PE `source` in `channel`, into local
  // PE j at its next place there (`written` counts its earlier ones): the token's x from `x`
  // into PE j's rows (none when j could not place them), and `write_meta(meta)` the rest into
  // its region.
  template <typename WriteMeta>
  void deliver(int64_t record, int source, int channel, int j, int64_t& written, const std::byte* x,
               const WriteMeta& write_meta) {
    const int64_t* span = counted(source, channel, j);
    const int64_t at = span[0] + written++;
    const LocalLoans::Borrowed& rows = local_rows_[j];
    // Its records name PE j more often than its counts said, or the counts (in the shared
    // heap, which attached processes map) changed since the regions and rows were sized.
    if (at >= span[1] || at < 0 || at >= most_received_ || record < 0 || record >= forwarded_ ||
        (!rows.discard && uint64_t(at) >= rows.memory.size() / format_.x_bytes)) {
      miscounted(source, channel, j, "at least " + std::to_string(written));
    }
    if (!rows.discard)
      copy_row_[j](rows.memory.data() + size_t(at) * format_.x_bytes, x, format_.x_bytes);
    write_meta(static_cast<std::byte*>(pe_.ptr(recv_region_, my_node_ * ranks_ + j)) +
               size_t(at) * format_.meta_stride());
    result_.paths.nvl_slot[size_t(record) * ranks_ + j] = at;
  }
  // Tells each local PE how many of `source`'s records in `channel` were delivered to it: once
  // per (source, channel), as a receiver reads none before all have come. Fewer than counted
  // fails here, at once, rather than at the receiver's deadline.
  void publish(CommPort& port, int source, int channel, const std::vector<int64_t>& written) {
    streaming_fence();  // this thread's rows are there before a receiver reads the count
    for (int j = 0; j < ranks_; ++j) {
      const int64_t* span = counted(source, channel, j);
      if (written[j] != span[1] - span[0]) {
        miscounted(source, channel, j, std::to_string(written[j]));
      }
      if (written[j] == 0) continue;
      port.signal_add(recv_tail_ + size_t(source) * channels_ + channel, uint64_t(written[j]),
                      my_node_ * ranks_ + j);
    }
  }

  // Step 2: this channel's tokens to every other destination node's forwarder, chunk by chunk,
  // then this node's, forwarded here.
  void send(CommPort& port, int channel) {
    const TokenRange range = channel_tokens(tokens_, channels_, channel);
    const size_t bytes = format_.bytes();
    std::vector<std::byte> staging(nodes_ > 1 ? size_t(o_.chunk_tokens) * bytes : 0);
    for (int step = 1; step < nodes_; ++step) {
      const int b = (my_node_ + step) % nodes_;
      if (!active_.has(b)) continue;
      const int forwarder = b * ranks_ + local_;
      const int64_t base = forwarder_base(my_node_, b, channel);
      const int64_t in_region = region_base(my_node_, b, channel);
      int64_t sent = 0, staged = 0;
      auto flush = [&] {
        if (staged == 0) return;
        port.put_signal(forward_region_ + size_t(in_region + sent) * bytes, staging.data(),
                        size_t(staged) * bytes,
                        forward_tail_ + size_t(my_node_) * channels_ + channel, uint64_t(staged),
                        SignalOp::kAdd, forwarder);
        sent += staged;
        staged = 0;
      };
      for (int64_t t = range.begin; t < range.end; ++t) {
        if (!layout_.goes_to_node(t, b)) continue;
        result_.paths.rdma_slot[size_t(t) * nodes_ + b] = base + sent + staged;
        encode(t, staging.data() + size_t(staged) * bytes);
        if (++staged == o_.chunk_tokens) flush();
      }
      flush();
    }
    send_own_node(port, channel, range);
  }

  // This PE is the forwarder of its own tokens for its node: each record is encoded once,
  // straight into every receiving PE's region, where forward() would have copied it.
  void send_own_node(CommPort& port, int channel, const TokenRange& range) {
    // From the snapshot taken at notify, as every index into the handle is.
    const int64_t base = result_.paths.forward_prefix[size_t(my_node_) * (channels_ + 1) + channel];
    std::vector<int64_t> written(ranks_, 0);
    int64_t sent = 0;
    for (int64_t t = range.begin; t < range.end; ++t) {
      if (!layout_.goes_to_node(t, my_node_)) continue;
      const int64_t record = base + sent++;
      result_.paths.rdma_slot[size_t(t) * nodes_ + my_node_] = record;
      for (int j = 0; j < ranks_; ++j) {
        if (!layout_.goes_to_pe(t, my_node_ * ranks_ + j)) continue;
        deliver(record, me_, channel, j, written[j], token_x(t),
                [&](std::byte* meta) { encode_meta(t, meta); });
      }
    }
    publish(port, me_, channel, written);
  }

  // Step 3: every record this forwarder receives in this channel from another node, into each
  // destination PE.
  void forward(CommPort& port, int channel) {
    const size_t bytes = format_.bytes();
    const int first_expert_node = my_node_ * ranks_;
    std::vector<char> to(ranks_);  // the local PEs a record goes to
    for (int a = 0; a < nodes_; ++a) {
      if (a == my_node_ || !active_.has(a)) continue;  // sent straight to the receivers, or none
      const int source = a * ranks_ + local_;
      const int64_t base = result_.paths.forward_prefix[size_t(a) * (channels_ + 1) + channel];
      const int64_t count =
          result_.paths.forward_prefix[size_t(a) * (channels_ + 1) + channel + 1] - base;
      const int64_t in_region = base - (a > my_node_ ? own_records_ : 0);
      std::vector<int64_t> written(ranks_, 0);
      for (int64_t i = 0; i < count; ++i) {
        const uint64_t* tail = forward_tail_ + size_t(a) * channels_ + channel;
        if (pe_.signal_fetch(tail) < uint64_t(i + 1)) {
          pe_.signal_wait_until(tail, Cmp::kGe, uint64_t(i + 1), pe_.deadline(),
                                "dispatch channel " + std::to_string(channel) +
                                    ": records from PE " + std::to_string(source),
                                source);
        }
        const std::byte* record = forward_region_ + size_t(in_region + i) * bytes;
        std::fill(to.begin(), to.end(), 0);
        for (int k = 0; k < o_.topk; ++k) {
          int32_t expert;
          std::memcpy(&expert, record + format_.meta_at() + size_t(k) * 4, 4);
          if (expert < 0) continue;
          const int pe = expert_pe(o_, n_, expert);
          if (pe / ranks_ == my_node_) to[pe - first_expert_node] = true;
        }
        for (int j = 0; j < ranks_; ++j) {
          if (!to[j]) continue;
          deliver(base + i, source, channel, j, written[j], record, [&](std::byte* meta) {
            std::memcpy(meta, record + format_.meta_at(), format_.meta_bytes());
          });
        }
      }
      publish(port, source, channel, written);
    }
  }

  // This PE's received tokens, once every (source, channel) tail reached its count (as this PE
  // read it at notify: the counts in the heap may have been rewritten since).
  void receive() {
    for (int s = 0; s < n_; ++s) {
      if (!active_.has(pe_.node_of(s))) continue;
      // A source of this node writes its tail itself; another node's, this node's forwarder
      // with its local rank.
      const int writer = pe_.node_of(s) == my_node_ ? s : my_node_ * ranks_ + pe_.local_rank_of(s);
      for (int c = 0; c < channels_; ++c) {
        const int64_t* from = &result_.paths.recv_prefix[size_t(s) * (channels_ + 1) + c];
        pe_.signal_wait_until(
            recv_tail_ + size_t(s) * channels_ + c, Cmp::kGe, uint64_t(from[1] - from[0]),
            pe_.deadline(),
            "dispatch: tokens from PE " + std::to_string(s) + " in channel " + std::to_string(c),
            writer);
      }
    }
    DispatchResult& r = result_;
    r.received = received_;
    r.topk_idx.resize(size_t(received_) * o_.topk);
    r.topk_weights.resize(size_t(received_) * o_.topk);
    r.sources.resize(received_);
    for (int64_t i = 0; i < received_; ++i) {
      const std::byte* meta = recv_region_ + size_t(i) * format_.meta_stride();
      std::memcpy(&r.topk_idx[size_t(i) * o_.topk], meta, format_.ids_bytes());
      std::memcpy(&r.topk_weights[size_t(i) * o_.topk], meta + format_.weights_in_meta(),
                  format_.ids_bytes());
      for (int k = 0; k < o_.topk; ++k) {
        int32_t& id = r.topk_idx[size_t(i) * o_.topk + k];
        if (id >= 0 && expert_pe(o_, n_, id) != me_) id = -1;
      }
      int32_t source[2];
      std::memcpy(source, meta + format_.source_in_meta(), 8);
      if (source[0] < 0 || source[0] >= n_ || source[1] < 0 || source[1] >= kMaxMoeTokens) {
        throw PeerError("dispatch: received token " + std::to_string(i) + " names PE " +
                        std::to_string(source[0]) + "'s token " + std::to_string(source[1]) +
                        ": its shared heap was written by something other than a daemon");
      }
      r.sources[i] = ReceivedToken{source[0], source[1]};
    }
  }

  void release() {
    pe_.free(recv_tail_);
    pe_.free(recv_region_);
    pe_.free(forward_tail_);
    pe_.free(forward_region_);
    pe_.free(notify_node_);
    pe_.free(notify_pe_);
  }

  Pe& pe_;
  const MoeOptions& o_;
  const std::byte* x_;  // [tokens][hidden] in o_.x_dtype
  const Routing& routing_;
  const int64_t tokens_;  // this PE's: PEs may hold different numbers, or none
  const ClusterShape shape_;
  const int n_, nodes_, ranks_, me_, my_node_, local_, channels_;
  const ActiveNodes active_;  // before the layout: made first, as on every PE taking part
  const RecordFormat format_;
  const DispatchLayout layout_;
  const PlaceDispatchRows& place_x_;
  DispatchResult result_;  // built in the storage of the caller's earlier result
  std::exception_ptr placing_failed_;
  int64_t received_ = 0, forwarded_ = 0;
  int64_t most_received_ = 0;  // the receive region's records, on every PE
  int64_t own_records_ = 0;    // this PE's node's records: in the forwarder order, not its region
  uint64_t* notify_pe_ = nullptr;        // [source PE][channel] + the arrival counter
  uint64_t* notify_node_ = nullptr;      // [source node][destination node][channel] + counter
  std::vector<uint64_t> node_counts_;    // notify_node_'s counts, copied out and checked
  std::byte* forward_region_ = nullptr;  // records from the PEs of this local rank elsewhere
  uint64_t* forward_tail_ = nullptr;     // [source node][channel]: records landed
  std::byte* recv_region_ = nullptr;     // this PE's received tokens' meta parts
  uint64_t* recv_tail_ = nullptr;        // [source PE][channel]: tokens written here
  std::vector<std::vector<int64_t>> local_prefix_;  // per PE of this node: its recv_prefix
  std::vector<LocalLoans::Borrowed> local_rows_;    // per PE of this node: its rows' room
  // Per PE of this node: how its rows are copied, around the cache when they add up to the
  // streaming threshold (common/streaming_copy.h).
  std::vector<CopyInto> copy_row_;
  // Last: destroyed first, so a failed call's lent rows outlive every node peer's writes.
  std::optional<LoanScope> loan_;
};

}  // namespace

DispatchResult dispatch(Pe& pe, const MoeOptions& options, const void* x, const Routing& routing,
                        DispatchResult reuse, const PlaceDispatchRows& place_x) {
  validate(options, pe.node().nodes(), pe.node().ranks_per_node());
  if (routing.topk != options.topk) {
    throw InvalidArgument("dispatch: PE " + std::to_string(pe.my_pe()) + " has a routing of topk " +
                          std::to_string(routing.topk) + "; the job's topk is " +
                          std::to_string(options.topk));
  }
  check_routing_to_active(pe, options, routing);
  return Dispatcher(pe, options, static_cast<const std::byte*>(x), routing, std::move(reuse),
                    place_x)
      .run();
}

DispatchResult dispatch(Pe& pe, const MoeOptions& options, const std::vector<uint16_t>& x,
                        const Routing& routing, DispatchResult reuse) {
  if (options.x_dtype != DType::kBF16 || routing.topk != options.topk ||
      x.size() != size_t(routing.tokens) * options.hidden) {
    throw InvalidArgument(
        "dispatch: PE " + std::to_string(pe.my_pe()) + " has " + std::to_string(x.size()) +
        " token values and a routing of " + std::to_string(routing.tokens) + " x " +
        std::to_string(routing.topk) + "; the job needs tokens x hidden values (hidden " +
        std::to_string(options.hidden) + ") and topk " + std::to_string(options.topk));
  }
  return dispatch(pe, options, static_cast<const void*>(x.data()), routing, std::move(reuse));
}

}  // namespace symmesh
