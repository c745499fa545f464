// Operations on words of a node's own segment shared by every transport's receiving side:
// bounds checks and the release-ordered signal update that makes data visible before it.
#pragma once

#include <atomic>
#include <string>

#include "transport/transport.h"

namespace symmesh {

inline bool in_bounds(uint64_t offset, uint64_t length, size_t segment_size) {
  return offset <= segment_size && length <= segment_size - offset;
}

// Empty when [offset, offset + length) fits the segment (and is 8-byte aligned when
// `word` is set); otherwise what is wrong and what is allowed.
std::string check_range(uint64_t offset, uint64_t length, size_t segment_size, bool word);

inline std::atomic_ref<uint64_t> segment_word(const SegmentView& segment, uint64_t offset) {
  return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(segment.base + offset));
}

// Release order: a PE that acquires the signal word sees the data written before it.
inline void apply_signal(const SegmentView& segment, const SignalUpdate& signal) {
  auto word = segment_word(segment, signal.offset);
  if (signal.op == SignalOp::kSet) {
    word.store(signal.value, std::memory_order_release);
  } else {
    word.fetch_add(signal.value, std::memory_order_release);
  }
}

}  // namespace symmesh
