#include "ops/moe/low_latency.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "common/check_range.h"
#include "ops/moe/options.h"
#include "ops/roles/workspace.h"
#include "runtime/barrier.h"

namespace symmesh {
namespace {

constexpr const char* kShrink = "the low-latency buffer (max tokens, hidden)";
constexpr int kCountBits = 24;  // a signal: the call's sequence number, then the record count
constexpr size_t kHeaderBytes = 16;

struct RecordHeader {
  int32_t local_expert;
  int32_t unused;
  int64_t source_token;
};
static_assert(sizeof(RecordHeader) == kHeaderBytes);

// The shape as a MoE job's options (hidden, topk, experts over the PEs), and the token cap.
void check_shape(const LowLatencyShape& s, int n_pes) {
  MoeOptions o;
  o.tokens = s.max_tokens;
  o.hidden = s.hidden;
  o.topk = s.topk;
  o.experts = s.experts;
  validate(o, 1, n_pes);
  check_range("max tokens", s.max_tokens, 1, kMaxLowLatencyTokens, "per PE, low-latency");
}

}  // namespace

LowLatencyBuffer::LowLatencyBuffer(Pe& pe, const LowLatencyShape& shape)
    : pe_(pe), shape_(shape), n_(pe.n_pes()), records_per_source_([&] {
        check_shape(shape, pe.n_pes());
        return shape.max_tokens * std::min(shape.topk, shape.experts / pe.n_pes());
      }()) {
  const size_t halves = 2 * size_t(n_) * size_t(records_per_source_);
  dispatch_region_ = static_cast<std::byte*>(symmetric_region(
      pe, halves * record_bytes(), "low-latency dispatch records (2 x PEs x tokens)", kShrink));
  combine_region_ = static_cast<std::byte*>(
      symmetric_region(pe, halves * size_t(shape.hidden) * dtype_size(shape.dtype),
                       "low-latency combine rows (2 x PEs x tokens)", kShrink));
  dispatch_signal_ = static_cast<uint64_t*>(
      symmetric_zeroed(pe, 2 * size_t(n_) * sizeof(uint64_t), "low-latency signals", kShrink));
  combine_signal_ = static_cast<uint64_t*>(
      symmetric_zeroed(pe, 2 * size_t(n_) * sizeof(uint64_t), "low-latency signals", kShrink));
  staging_.resize(size_t(records_per_source_) * record_bytes());
  barrier_all(pe);  // no PE signals a peer before the peer has cleared its signals
}

LowLatencyBuffer::~LowLatencyBuffer() {
  pe_.free(combine_signal_);
  pe_.free(dispatch_signal_);
  pe_.free(combine_region_);
  pe_.free(dispatch_region_);
}

size_t LowLatencyBuffer::record_bytes() const {
  return kHeaderBytes + size_t(shape_.hidden) * dtype_size(shape_.dtype);
}

std::byte* LowLatencyBuffer::dispatch_block(int half, int source) const {
  return dispatch_region_ +
         (size_t(half) * n_ + size_t(source)) * size_t(records_per_source_) * record_bytes();
}

std::byte* LowLatencyBuffer::combine_block(int half, int expert_pe) const {
  return combine_region_ + (size_t(half) * n_ + size_t(expert_pe)) * size_t(records_per_source_) *
                               size_t(shape_.hidden) * dtype_size(shape_.dtype);
}

void LowLatencyBuffer::wait_for(uint64_t* word, uint64_t sequence, int peer, const char* what) {
  pe_.signal_wait_until(
      word, Cmp::kGe, sequence << kCountBits, pe_.deadline(),
      std::string("low-latency ") + what + " waiting for PE " + std::to_string(peer));
}

LowLatencyDispatch LowLatencyBuffer::dispatch(const void* x, const Routing& routing) {
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
        "a low-latency dispatch while two earlier ones are not yet combined: combine the older "
        "first (two micro-batches may be in flight)");
  }
  const uint64_t sequence = ++sequence_;
  live_[half] = true;
  const int me = pe_.my_pe();
  const int per_pe = local_experts();
  const size_t row = size_t(s.hidden) * dtype_size(s.dtype);
  const auto* tokens = static_cast<const std::byte*>(x);

  LowLatencyDispatch d;
  d.half = half;
  d.sequence = sequence;
  d.sent_record.assign(size_t(routing.tokens) * s.topk, -1);
  // Per destination (every PE starting with a different one): its records in (token, k) order,
  // packed, then one put_signal.
  const size_t record = record_bytes();
  for (int step = 0; step < n_; ++step) {
    const int dest = (me + step) % n_;
    uint64_t count = 0;
    for (int64_t t = 0; t < routing.tokens; ++t) {
      for (int k = 0; k < s.topk; ++k) {
        const int32_t expert = routing.expert(t, k);
        if (expert < 0 || expert / per_pe != dest) continue;
        d.sent_record[size_t(t) * s.topk + k] = int64_t(count);
        const RecordHeader header{expert % per_pe, 0, t};
        std::byte* at = staging_.data() + count++ * record;
        std::memcpy(at, &header, kHeaderBytes);
        std::memcpy(at + kHeaderBytes, tokens + size_t(t) * row, row);
      }
    }
    pe_.put_signal(dispatch_block(half, me), staging_.data(), count * record,
                   signal(dispatch_signal_, half, me), (sequence << kCountBits) | count,
                   SignalOp::kSet, dest);
  }

  // Receive: every source's records, checked and counted per expert, then copied into x,
  // expert by expert, sources in PE order.
  auto header_of = [&](int source, uint64_t r) {
    RecordHeader header;
    std::memcpy(&header, dispatch_block(half, source) + r * record, kHeaderBytes);
    return header;
  };
  d.offset.assign(size_t(per_pe) + 1, 0);
  d.record_row.resize(n_);
  for (int source = 0; source < n_; ++source) {
    uint64_t* word = signal(dispatch_signal_, half, source);
    wait_for(word, sequence, source, "dispatch");
    const uint64_t count = pe_.signal_fetch(word) & ((uint64_t{1} << kCountBits) - 1);
    if (count > uint64_t(records_per_source_)) {
      throw PeerError("PE " + std::to_string(source) + " signalled " + std::to_string(count) +
                      " low-latency records; at most " + std::to_string(records_per_source_) +
                      " fit");
    }
    d.record_row[source].resize(count);
    for (uint64_t r = 0; r < count; ++r) {
      const int32_t expert = header_of(source, r).local_expert;
      if (expert < 0 || expert >= per_pe) {
        throw PeerError("PE " + std::to_string(source) + " sent a record for local expert " +
                        std::to_string(expert) + "; this PE holds " + std::to_string(per_pe));
      }
      ++d.offset[expert + 1];
      d.record_row[source][r] = expert;  // checked once; its row replaces it below
    }
  }
  std::partial_sum(d.offset.begin(), d.offset.end(), d.offset.begin());
  d.x.resize(size_t(d.received()) * row);
  d.source_pe.resize(d.received());
  d.source_token.resize(d.received());
  std::vector<int64_t> next(d.offset.begin(), d.offset.end() - 1);
  for (int source = 0; source < n_; ++source) {
    for (size_t r = 0; r < d.record_row[source].size(); ++r) {
      int64_t& expert_then_row = d.record_row[source][r];
      const int64_t slot = next[expert_then_row]++;
      std::memcpy(d.x.data() + size_t(slot) * row,
                  dispatch_block(half, source) + r * record + kHeaderBytes, row);
      d.source_pe[slot] = source;
      d.source_token[slot] = header_of(source, r).source_token;
      expert_then_row = slot;
    }
  }
  return d;
}

std::vector<std::byte> LowLatencyBuffer::combine(LowLatencyDispatch& handle, const void* expert_out,
                                                 const Routing& routing) {
  const LowLatencyShape& s = shape_;
  if (handle.sequence == 0 || handle.half < 0 || handle.half > 1 || !live_[handle.half] ||
      handle.sequence + 2 <= sequence_) {
    throw InvalidArgument(
        "a low-latency combine of a dispatch already combined, or not this buffer's");
  }
  if (size_t(routing.tokens) * s.topk != handle.sent_record.size()) {
    throw InvalidArgument("a low-latency combine with another routing than its dispatch's");
  }
  live_[handle.half] = false;
  const int me = pe_.my_pe();
  const size_t row = size_t(s.hidden) * dtype_size(s.dtype);
  const auto* rows = static_cast<const std::byte*>(expert_out);

  // Send each source its rows back, in the order its records came.
  for (int step = 0; step < n_; ++step) {
    const int source = (me + step) % n_;
    const std::vector<int64_t>& records = handle.record_row[source];
    for (size_t r = 0; r < records.size(); ++r) {
      std::memcpy(staging_.data() + r * row, rows + size_t(records[r]) * row, row);
    }
    pe_.put_signal(combine_block(handle.half, me), staging_.data(), records.size() * row,
                   signal(combine_signal_, handle.half, me),
                   (handle.sequence << kCountBits) | records.size(), SignalOp::kSet, source);
  }

  // Sum each token's rows in topk order, weighted, in f32; round once.
  for (int expert_pe = 0; expert_pe < n_; ++expert_pe) {
    wait_for(signal(combine_signal_, handle.half, expert_pe), handle.sequence, expert_pe,
             "combine");
  }
  const int per_pe = local_experts();
  std::vector<std::byte> combined(size_t(routing.tokens) * row);
  std::vector<float> sum(s.hidden), term(s.hidden);
  for (int64_t t = 0; t < routing.tokens; ++t) {
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int k = 0; k < s.topk; ++k) {
      const int32_t expert = routing.expert(t, k);
      if (expert < 0) continue;
      const int64_t record = handle.sent_record[size_t(t) * s.topk + k];
      load_f32(term.data(), combine_block(handle.half, expert / per_pe) + size_t(record) * row,
               size_t(s.hidden), s.dtype);
      const float weight = routing.weight(t, k);
      for (int64_t h = 0; h < s.hidden; ++h) sum[h] += weight * term[h];
    }
    store_from_f32(combined.data() + size_t(t) * row, sum.data(), size_t(s.hidden), s.dtype);
  }
  return combined;
}

}  // namespace symmesh
