#include "runtime/heap_allocator.h"

#include <string>

#include "common/units.h"

namespace symmesh {

HeapAllocator::HeapAllocator(uint64_t begin, uint64_t end) : begin_(begin), end_(end) {
  reset();
}

void HeapAllocator::reset() {
  free_.clear();
  allocated_.clear();
  used_ = 0;
  peak_ = 0;
  if (end_ > begin_) free_[begin_] = end_ - begin_;
}

size_t HeapAllocator::largest_free_block() const {
  uint64_t largest = 0;
  for (const auto& [offset, size] : free_) largest = std::max(largest, size);
  return largest;
}

uint64_t HeapAllocator::allocate(size_t bytes, size_t alignment) {
  if (alignment < 8 || (alignment & (alignment - 1)) != 0) {
    throw InvalidArgument("symmetric malloc: alignment " + std::to_string(alignment) +
                          " is not a power of two >= 8");
  }
  const uint64_t want = std::max<uint64_t>(bytes, 1);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const uint64_t start = it->first;
    const uint64_t size = it->second;
    const uint64_t aligned = (start + alignment - 1) & ~uint64_t(alignment - 1);
    // The alignment's padding and `want` must both lie in the block, tested without a sum that
    // could wrap: `bytes` is any size a caller (an attached process) asked for.
    if (aligned - start > size || want > size - (aligned - start)) continue;
    // Carve [start, aligned + want) rounded up to 8 bytes so the next block stays aligned.
    const uint64_t carved_end = std::min(start + size, (aligned + want + 7) & ~uint64_t(7));
    free_.erase(it);
    if (carved_end < start + size) free_[carved_end] = start + size - carved_end;
    allocated_[aligned] = Block{start, carved_end - start};
    used_ += carved_end - start;
    peak_ = std::max(peak_.load(std::memory_order_relaxed), used());
    return aligned;
  }
  throw HeapExhausted("symmetric heap exhausted: asked " + format_bytes(bytes) + ", " +
                      format_bytes(capacity() - used()) + " free (largest free block " +
                      format_bytes(largest_free_block()) + ") of " + format_bytes(capacity()) +
                      " per PE; start the daemons with a larger --heap-size");
}

void HeapAllocator::release(uint64_t offset) {
  auto it = allocated_.find(offset);
  if (it == allocated_.end()) {
    throw InvalidArgument("symmetric free: offset " + std::to_string(offset) +
                          " was not returned by symmetric malloc (or was freed already)");
  }
  uint64_t start = it->second.start;
  uint64_t size = it->second.size;
  used_ -= size;
  allocated_.erase(it);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == start) {
      previous->second += size;
      return;
    }
  }
  free_[start] = size;
}

}  // namespace symmesh
