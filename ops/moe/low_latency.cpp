#include "ops/moe/low_latency.h"

#include <algorithm>
#include <cstring>
#include <string>

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

void check_shape(const LowLatencyShape& s, int n_pes) {
  auto check = [](const char* field, int64_t value, int64_t low, int64_t high) {
    if (value >= low && value <= high) return;
    throw InvalidArgument(std::string(field) + " = " + std::to_string(value) +
                          " is out of range: allowed " + std::to_string(low) + " to " +
                          std::to_string(high));
  };
  check("max tokens", s.max_tokens, 1, kMaxLowLatencyTokens);
  check("hidden", s.hidden, 1, kMaxMoeHidden);
  check("topk", s.topk, 1, kMaxMoeTopk);
  check("experts", s.experts, n_pes, kMaxMoeExperts);
  if (s.hidden % kMoeHiddenMultiple != 0) {
    throw InvalidArgument("hidden = " + std::to_string(s.hidden) + " is not a multiple of " +
                          std::to_string(kMoeHiddenMultiple));
  }
  if (s.experts % n_pes != 0) {
    throw InvalidArgument("experts = " + std::to_string(s.experts) +
                          " does not split evenly over " + std::to_string(n_pes) + " PEs");
  }
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
  // Pack each destination's records in (token, k) order, then one put_signal to each.
  std::vector<std::vector<std::byte>> out(n_);
  for (int64_t t = 0; t < routing.tokens; ++t) {
    for (int k = 0; k < s.topk; ++k) {
      const int32_t expert = routing.expert(t, k);
      if (expert < 0) continue;
      const int dest = expert / per_pe;
      std::vector<std::byte>& records = out[dest];
      d.sent_record[size_t(t) * s.topk + k] = int64_t(records.size() / record_bytes());
      const RecordHeader header{expert % per_pe, 0, t};
      const size_t at = records.size();
      records.resize(at + record_bytes());
      std::memcpy(records.data() + at, &header, kHeaderBytes);
      std::memcpy(records.data() + at + kHeaderBytes, tokens + size_t(t) * row, row);
    }
  }
  for (int step = 0; step < n_; ++step) {
    const int dest = (me + step) % n_;  // every PE starts with a different peer
    const uint64_t count = out[dest].size() / record_bytes();
    pe_.put_signal(dispatch_block(half, me), out[dest].data(), out[dest].size(),
                   signal(dispatch_signal_, half, me), (sequence << kCountBits) | count,
                   SignalOp::kSet, dest);
  }

  // Receive: every source's records, into per-expert arrays, sources in PE order.
  d.rows_per_expert = s.max_tokens * n_;
  d.count.assign(per_pe, 0);
  d.x.resize(size_t(per_pe) * d.rows_per_expert * row);
  d.source_pe.assign(size_t(per_pe) * d.rows_per_expert, -1);
  d.source_token.assign(size_t(per_pe) * d.rows_per_expert, -1);
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
    const std::byte* block = dispatch_block(half, source);
    d.record_row[source].resize(count);
    for (uint64_t r = 0; r < count; ++r) {
      RecordHeader header;
      std::memcpy(&header, block + r * record_bytes(), kHeaderBytes);
      if (header.local_expert < 0 || header.local_expert >= per_pe) {
        throw PeerError("PE " + std::to_string(source) + " sent a record for local expert " +
                        std::to_string(header.local_expert) + "; this PE holds " +
                        std::to_string(per_pe));
      }
      const int64_t slot = header.local_expert * d.rows_per_expert + d.count[header.local_expert]++;
      std::memcpy(d.x.data() + size_t(slot) * row, block + r * record_bytes() + kHeaderBytes, row);
      d.source_pe[slot] = source;
      d.source_token[slot] = header.source_token;
      d.record_row[source][r] = slot;
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
  std::vector<std::byte> out;
  for (int step = 0; step < n_; ++step) {
    const int source = (me + step) % n_;
    const std::vector<int64_t>& records = handle.record_row[source];
    out.resize(records.size() * row);
    for (size_t r = 0; r < records.size(); ++r) {
      std::memcpy(out.data() + r * row, rows + size_t(records[r]) * row, row);
    }
    pe_.put_signal(combine_block(handle.half, me), out.data(), out.size(),
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
