#include "ops/moe/low_latency.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>

#include "common/check_range.h"
#include "common/streaming_copy.h"
#include "ops/moe/options.h"
#include "ops/roles/workspace.h"
#include "runtime/barrier.h"
#include "runtime/collectives/reduce_kernels.h"
#include "runtime/loan_scope.h"

namespace symmesh {
namespace {

constexpr const char* kShrink = "the low-latency buffer (max tokens, hidden)";

// A record's header, read field by field from a block: the source token, then per topk slot
// the expert (int32) and its gate weight (f32).
int64_t header_token(const std::byte* record) {
  int64_t token = 0;
  std::memcpy(&token, record, sizeof token);
  return token;
}
int32_t header_expert(const std::byte* record, int k) {
  int32_t expert = 0;
  std::memcpy(&expert, record + low_latency_expert_at(k), sizeof expert);
  return expert;
}
float header_weight(const std::byte* record, int topk, int k) {
  float weight = 0;
  std::memcpy(&weight, record + low_latency_weight_at(topk, k), sizeof weight);
  return weight;
}

std::string pe_name(int pe) {
  return "PE " + std::to_string(pe);
}

}  // namespace

void check_low_latency_shape(const LowLatencyShape& s, int n_pes) {
  MoeOptions o;
  o.tokens = s.max_tokens;
  o.hidden = s.hidden;
  o.topk = s.topk;
  o.experts = s.experts;
  validate(o, 1, n_pes);
  check_range("max tokens", s.max_tokens, 1, kMaxLowLatencyTokens, "per PE, low-latency");
}

LowLatencyBuffer::LowLatencyBuffer(Pe& pe, const LowLatencyShape& shape)
    : pe_(pe),
      shape_(shape),
      n_(pe.n_pes()),
      ranks_(pe.node().ranks_per_node()),
      nodes_(pe.node().nodes()),
      header_bytes_(low_latency_header_bytes(shape.topk)) {
  check_low_latency_shape(shape, n_);
  const size_t tokens = size_t(shape.max_tokens), halves = 2;
  dispatch_region_ = static_cast<std::byte*>(
      symmetric_region(pe, halves * nodes_ * tokens * record_bytes(),
                       "low-latency dispatch records (2 x nodes x tokens)", kShrink));
  combine_region_ = static_cast<std::byte*>(
      symmetric_region(pe, halves * nodes_ * tokens * row_bytes(),
                       "low-latency combine rows (2 x nodes x tokens)", kShrink));
  signals_ = static_cast<uint64_t*>(
      symmetric_zeroed(pe, 4 * size_t(nodes_) * sizeof(uint64_t), "low-latency signals", kShrink));
  staging_.resize(tokens * std::max(header_bytes_, row_bytes()));
  pieces_.reserve(2 * tokens);
  packed_tokens_.reserve(tokens);
  barrier_all(pe);  // no PE signals a peer before the peer has cleared its signals
}

LowLatencyBuffer::~LowLatencyBuffer() {
  pe_.free(signals_);
  pe_.free(combine_region_);
  pe_.free(dispatch_region_);
}

size_t LowLatencyBuffer::row_bytes() const {
  return size_t(shape_.hidden) * dtype_size(shape_.dtype);
}

std::byte* LowLatencyBuffer::dispatch_block(int half, int source_node) const {
  return dispatch_region_ +
         (size_t(half) * nodes_ + size_t(source_node)) * size_t(shape_.max_tokens) * record_bytes();
}

std::byte* LowLatencyBuffer::combine_block(int half, int node) const {
  return combine_region_ +
         (size_t(half) * nodes_ + size_t(node)) * size_t(shape_.max_tokens) * row_bytes();
}

uint64_t* LowLatencyBuffer::dispatch_signal(int half, int source_node) const {
  return signals_ + size_t(half) * nodes_ + size_t(source_node);
}

uint64_t* LowLatencyBuffer::combine_signal(int half, int node) const {
  return signals_ + 2 * size_t(nodes_) + size_t(half) * nodes_ + size_t(node);
}

uint64_t LowLatencyBuffer::landed(const uint64_t* word, int source) const {
  const uint64_t count = pe_.signal_fetch(word) & kCountMask;
  if (count > uint64_t(shape_.max_tokens)) {
    throw PeerError(pe_name(source) + " signalled " + std::to_string(count) +
                    " low-latency records; at most " + std::to_string(shape_.max_tokens) + " fit");
  }
  return count;
}

void LowLatencyBuffer::wait_for(const uint64_t* word, uint64_t sequence, int peer,
                                const char* what) {
  pe_.signal_wait_until(word, Cmp::kGe, sequence << kCountBits, pe_.deadline(),
                        std::string("low-latency ") + what + " waiting for " + pe_name(peer), peer);
}

size_t LowLatencyBuffer::pack_headers(const Routing& routing, int node, std::byte* headers,
                                      size_t stride, LowLatencyDispatch& d) {
  const int topk = shape_.topk, first = node * ranks_ * local_experts();
  const int last = first + ranks_ * local_experts();
  size_t count = 0;
  packed_tokens_.clear();
  for (int64_t t = 0; t < routing.tokens; ++t) {
    bool here = false;
    for (int k = 0; k < topk; ++k) {
      const int32_t e = routing.expert(t, k);
      here = here || (e >= first && e < last);
    }
    if (!here) continue;
    d.sent_record[size_t(t) * nodes_ + node] = int64_t(count);
    packed_tokens_.push_back(t);
    std::byte* at = headers + count++ * stride;
    std::memset(at, 0, header_bytes_);
    std::memcpy(at, &t, sizeof t);
    for (int k = 0; k < topk; ++k) {
      const int32_t e = routing.expert(t, k);
      const int32_t expert = e >= first && e < last ? e : -1;
      const float weight = routing.weight(t, k);
      std::memcpy(at + low_latency_expert_at(k), &expert, sizeof expert);
      std::memcpy(at + low_latency_weight_at(topk, k), &weight, sizeof weight);
    }
  }
  return count;
}

LowLatencyDispatch LowLatencyBuffer::dispatch(const void* x, const Routing& routing,
                                              const PlaceReceivedX& place_x) {
  const LowLatencyShape& s = shape_;
  if (routing.tokens > s.max_tokens || routing.topk != s.topk) {
    throw InvalidArgument("a low-latency dispatch of " + std::to_string(routing.tokens) +
                          " tokens with topk " + std::to_string(routing.topk) +
                          ": the buffer takes at most " + std::to_string(s.max_tokens) +
                          " tokens with topk " + std::to_string(s.topk));
  }
  check_routing(routing, s.experts, "topk_idx");
  const int half = int(sequence_ % 2);
  if (live_[half]) {
    throw InvalidArgument(
        "a low-latency dispatch while the one two dispatches back is not yet combined: combine "
        "it first (two micro-batches may be in flight, each half taken again two dispatches "
        "later)");
  }
  const uint64_t sequence = ++sequence_;
  live_[half] = true;
  const int me = pe_.my_pe(), my_node = pe_.my_node();

  LowLatencyDispatch d;
  d.half = half;
  d.sequence = sequence;
  d.sent_record.assign(size_t(routing.tokens) * nodes_, -1);
  d.sent.assign(nodes_, 0);
  // Other nodes first, each with one put_signal that gathers every record's header (from the
  // staging area) and its token's row (from x) where they lie: their records cross the network.
  // This node's records are packed straight into this PE's own block, where its node peers read
  // them.
  const auto* tokens = static_cast<const std::byte*>(x);
  const size_t row = row_bytes(), record = record_bytes();
  for (int step = 1; step <= nodes_; ++step) {
    const int node = (my_node + step) % nodes_;
    const bool own = node == my_node;
    std::byte* headers = own ? dispatch_block(half, my_node) : staging_.data();
    const size_t stride = own ? record : header_bytes_;
    const size_t count = pack_headers(routing, node, headers, stride, d);
    d.sent[node] = count;
    const uint64_t value = (sequence << kCountBits) | count;
    if (own) {
      for (size_t r = 0; r < count; ++r) {
        std::memcpy(headers + r * record + header_bytes_, tokens + size_t(packed_tokens_[r]) * row,
                    row);
      }
      pe_.signal_set(dispatch_signal(half, my_node), value, me);
    } else {
      pieces_.clear();
      for (size_t r = 0; r < count; ++r) {
        pieces_.push_back({headers + r * stride, header_bytes_});
        pieces_.push_back({tokens + size_t(packed_tokens_[r]) * row, row});
      }
      pe_.put_signal(dispatch_block(half, my_node), pieces_, dispatch_signal(half, my_node), value,
                     SignalOp::kSet, landing_pe(node, me));
    }
  }

  // Receive: every source's records, in place at their landing PE on this node, checked and
  // counted per local expert, then copied into x, expert by expert, sources in PE order.
  const int per_pe = local_experts(), first = me * per_pe;
  const int node_first = my_node * ranks_ * per_pe, node_last = node_first + ranks_ * per_pe;
  d.offset.assign(size_t(per_pe) + 1, 0);
  d.terms.resize(n_);
  d.landed.resize(n_);
  std::vector<const std::byte*> blocks(n_);
  for (int source = 0; source < n_; ++source) {
    const int landing = landing_pe(my_node, source);
    const auto* word =
        static_cast<const uint64_t*>(pe_.ptr(dispatch_signal(half, pe_.node_of(source)), landing));
    wait_for(word, sequence, source, "dispatch");
    const uint64_t count = landed(word, source);
    d.landed[source] = count;
    blocks[source] =
        static_cast<const std::byte*>(pe_.ptr(dispatch_block(half, pe_.node_of(source)), landing));
    for (uint64_t r = 0; r < count; ++r) {
      const std::byte* at = blocks[source] + r * record;
      for (int k = 0; k < s.topk; ++k) {
        const int32_t expert = header_expert(at, k);
        if (expert < 0) continue;
        if (expert < node_first || expert >= node_last) {
          throw PeerError(pe_name(source) + " sent node " + std::to_string(my_node) +
                          " a record for expert " + std::to_string(expert) + "; it holds " +
                          std::to_string(node_first) + " to " + std::to_string(node_last - 1));
        }
        if (expert / per_pe != me) continue;
        ++d.offset[expert - first + 1];
        // The local expert until its row is known below.
        d.terms[source].push_back({int64_t(r), expert - first, header_weight(at, s.topk, k)});
      }
    }
  }
  std::partial_sum(d.offset.begin(), d.offset.end(), d.offset.begin());
  std::byte* rows = nullptr;
  if (place_x) {
    rows = place_x(d.received());
  } else {
    d.x = std::move(spare_x_[half]);
    d.x.resize(size_t(d.received()) * row);
    rows = d.x.data();
  }
  d.source_pe.resize(d.received());
  d.source_token.resize(d.received());
  // Rows that outgrow this PE's share of the cache go around it: no read of each line of x
  // before it is written, and the records the node's PEs still read stay in the cache.
  // The rows are in x when the call returns or throws.
  const ScopedCopyInto copy_row(size_t(d.received()) * row);
  std::vector<int64_t> next(d.offset.begin(), d.offset.end() - 1);
  for (int source = 0; source < n_; ++source) {
    for (LowLatencyDispatch::Term& term : d.terms[source]) {
      const std::byte* at = blocks[source] + size_t(term.record) * record;
      const int64_t token = header_token(at);
      if (token < 0 || token >= s.max_tokens) {
        throw PeerError(pe_name(source) + " sent a record of token " + std::to_string(token) +
                        "; a PE has at most " + std::to_string(s.max_tokens));
      }
      const int64_t slot = next[term.row]++;
      copy_row(rows + size_t(slot) * row, at + header_bytes_, row);
      d.source_pe[slot] = source;
      d.source_token[slot] = token;
      term.row = slot;
    }
  }
  return d;
}

// The rows of `source`'s `count` records landed here: per record, the weighted sum of each of
// this node's PEs' expert rows for it (in topk order, in f32), added in local-rank order and
// rounded once into `out`. A node peer's rows and terms are read where it keeps them.
void LowLatencyBuffer::reduce_node(const LowLatencyDispatch& handle,
                                   const std::vector<LocalLoans::Borrowed>& lent, int source,
                                   uint64_t count, std::byte* out) const {
  const size_t hidden = size_t(shape_.hidden), row = row_bytes();
  std::vector<const LentExperts*> peers(ranks_);
  std::vector<size_t> next(ranks_, 0);  // each peer's first term not yet summed
  for (int q = 0; q < ranks_; ++q) {
    peers[q] = reinterpret_cast<const LentExperts*>(lent[q].memory.data());
    if (lent[q].memory.size() != sizeof(LentExperts) || peers[q]->sequence != handle.sequence ||
        peers[q]->buffer != pe_.slice_offset(dispatch_region_)) {
      throw InvalidArgument(
          "a low-latency combine whose node peer " + pe_name(pe_.my_node() * ranks_ + q) +
          " combines another dispatch, or another buffer's: every PE combines the same one");
    }
  }
  std::vector<WeightedRow> rows;
  std::vector<size_t> ends(ranks_);
  for (uint64_t r = 0; r < count; ++r) {
    rows.clear();
    for (int q = 0; q < ranks_; ++q) {
      const std::vector<LowLatencyDispatch::Term>& terms = (*peers[q]->terms)[source];
      for (; next[q] < terms.size() && uint64_t(terms[next[q]].record) == r; ++next[q]) {
        const LowLatencyDispatch::Term& term = terms[next[q]];
        if (term.row < 0 || term.row >= peers[q]->received) {
          throw InvalidArgument("a low-latency combine whose node peer " +
                                pe_name(pe_.my_node() * ranks_ + q) + " names row " +
                                std::to_string(term.row) + " of its " +
                                std::to_string(peers[q]->received) + " expert rows");
        }
        rows.push_back({peers[q]->rows + size_t(term.row) * row, shape_.dtype, term.weight});
      }
      ends[q] = rows.size();
    }
    weighted_group_sum(out + r * row, shape_.dtype, rows.data(), ends.data(), ends.size(), hidden);
  }
}

bool LowLatencyBuffer::live(const LowLatencyDispatch& handle) const {
  return handle.sequence != 0 && handle.half >= 0 && handle.half <= 1 && live_[handle.half] &&
         handle.sequence + 2 > sequence_ && handle.terms.size() == size_t(n_) &&
         handle.landed.size() == size_t(n_) && handle.sent.size() == size_t(nodes_);
}

void LowLatencyBuffer::release(LowLatencyDispatch& handle) {
  if (!live(handle)) return;
  live_[handle.half] = false;
  if (!handle.x.empty()) spare_x_[handle.half] = std::exchange(handle.x, {});
}

void LowLatencyBuffer::combine(LowLatencyDispatch& handle, const void* expert_out, void* out) {
  const LowLatencyShape& s = shape_;
  if (!live(handle)) {
    throw InvalidArgument(
        "a low-latency combine of a dispatch already combined, or not this buffer's");
  }
  live_[handle.half] = false;
  const int me = pe_.my_pe(), my_node = pe_.my_node(), half = handle.half;
  const uint64_t sequence = handle.sequence;
  const size_t hidden = size_t(s.hidden), row = row_bytes();
  const auto* rows = static_cast<const std::byte*>(expert_out);

  // The node's landing PEs read this PE's expert rows where they are, through the terms its
  // dispatch recorded (which rows of which records, with which weights), until the closing
  // node barrier.
  LentExperts mine{rows, handle.received(), &handle.terms, pe_.slice_offset(dispatch_region_),
                   sequence};
  LoanScope loan(pe_, std::span(reinterpret_cast<std::byte*>(&mine), sizeof mine));
  barrier(pe_, pe_.team_node());
  const std::vector<LocalLoans::Borrowed>& lent = loan.borrow_all();

  // As the landing PE of the sources with this local rank: the node's sum of each of their
  // records back to them, other nodes first, with one put_signal each.
  for (int step = 1; step <= nodes_; ++step) {
    const int source = (my_node + step) % nodes_ * ranks_ + pe_.local_rank();
    const bool own = source == me;
    std::byte* out = own ? combine_block(half, my_node) : staging_.data();
    const uint64_t count = handle.landed[source];  // as checked at dispatch
    reduce_node(handle, lent, source, count, out);
    const uint64_t value = (sequence << kCountBits) | count;
    if (own) {
      pe_.signal_set(combine_signal(half, my_node), value, me);
    } else {
      pe_.put_signal(combine_block(half, my_node), out, count * row, combine_signal(half, my_node),
                     value, SignalOp::kSet, source);
    }
  }
  loan.done_using();

  // Home: every node's rows of this PE's tokens, added in node order, rounded once.
  for (int node = 0; node < nodes_; ++node) {
    const int landing = landing_pe(node, me);
    wait_for(combine_signal(half, node), sequence, landing, "combine");
    const uint64_t count = pe_.signal_fetch(combine_signal(half, node)) & kCountMask;
    if (count != handle.sent[node]) {
      throw PeerError(pe_name(landing) + " sent " + std::to_string(count) +
                      " low-latency combine rows; this PE sent it " +
                      std::to_string(handle.sent[node]) + " records");
    }
  }
  const int64_t tokens = int64_t(handle.sent_record.size()) / nodes_;
  std::vector<TypedRow> node_rows;
  for (int64_t t = 0; t < tokens; ++t) {
    node_rows.clear();
    for (int node = 0; node < nodes_; ++node) {
      const int64_t record = handle.sent_record[size_t(t) * nodes_ + node];
      if (record >= 0)
        node_rows.push_back({combine_block(half, node) + size_t(record) * row, s.dtype});
    }
    reduce_rows(static_cast<std::byte*>(out) + size_t(t) * row, s.dtype, node_rows.data(),
                node_rows.size(), hidden);
  }
  barrier(pe_, pe_.team_node());  // no landing PE of this node still reads this PE's rows
  loan.complete();
  // expert_out, which may be the handle's x, is read: the storage goes back for the next call.
  if (!handle.x.empty()) spare_x_[half] = std::exchange(handle.x, {});
}

}  // namespace symmesh
