// A PE's registered bounce buffer (buffer.h) as a ring of byte ranges. Puts copy their data in (so
// the caller's buffer may be reused at once, and need not be registered), gets and fetch-adds land
// their results in it. Space is taken at the tail and returned at the head, in order, when the work
// requests using it complete. Positions grow without wrapping; a range never straddles the end of
// the buffer (the few bytes before the end are skipped instead).
#pragma once

#include <cstdint>
#include <optional>

namespace symmesh {

class BounceRing {
 public:
  explicit BounceRing(uint64_t capacity) : capacity_(capacity) {}

  uint64_t capacity() const { return capacity_; }
  uint64_t in_use() const { return tail_ - head_; }

  // The position of `bytes` contiguous bytes (8-byte aligned), or nothing while the ring is
  // too full. offset(position) is where they are in the buffer.
  std::optional<uint64_t> allocate(uint64_t bytes) {
    bytes = (bytes + 7) / 8 * 8;
    if (bytes > capacity_) return std::nullopt;
    uint64_t start = tail_;
    if (start % capacity_ + bytes > capacity_) start = (start / capacity_ + 1) * capacity_;
    if (start + bytes - head_ > capacity_) return std::nullopt;
    tail_ = start + bytes;
    return start;
  }
  uint64_t offset(uint64_t position) const { return position % capacity_; }
  uint64_t tail() const { return tail_; }
  // Everything before `position` (a former tail()) is free again.
  void release_to(uint64_t position) {
    if (position > head_) head_ = position;
  }
  // Takes back everything from `position` (a former tail(), or 0) to the tail: ranges
  // allocated for requests that were never posted.
  void take_back_from(uint64_t position) { tail_ = position > head_ ? position : head_; }

 private:
  uint64_t capacity_;
  uint64_t head_ = 0;
  uint64_t tail_ = 0;
};

}  // namespace symmesh
