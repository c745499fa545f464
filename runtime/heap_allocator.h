// The symmetric heap allocator of one PE: first fit over the user part of the slice, with
// coalescing frees. It is deterministic: PEs that make the same calls in the same order get
// the same offsets, which is what makes an allocation symmetric.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>

#include "common/errors.h"

namespace symmesh {

// Thrown when an allocation does not fit; the message gives the size asked and what is free.
class HeapExhausted : public Error {
 public:
  using Error::Error;
};

class HeapAllocator {
 public:
  // Manages offsets [begin, end).
  HeapAllocator(uint64_t begin, uint64_t end);

  // Returns the offset of `bytes` bytes aligned to `alignment` (a power of two, >= 8).
  uint64_t allocate(size_t bytes, size_t alignment = 64);
  // Frees an offset allocate() returned; throws InvalidArgument for anything else.
  void release(uint64_t offset);
  // Frees everything.
  void reset();

  size_t capacity() const { return end_ - begin_; }
  size_t used() const { return used_.load(std::memory_order_relaxed); }
  // The most in use at once since the last reset(): what a job's rings and workspaces took.
  size_t peak() const { return peak_.load(std::memory_order_relaxed); }
  size_t largest_free_block() const;
  bool owns(uint64_t offset) const { return allocated_.count(offset) != 0; }

 private:
  uint64_t begin_;
  uint64_t end_;
  std::atomic<size_t> used_{0};  // read by the status thread
  std::atomic<size_t> peak_{0};
  std::map<uint64_t, uint64_t> free_;  // offset -> size
  struct Block {
    uint64_t start;  // start of the carved block (before alignment)
    uint64_t size;   // carved size
  };
  std::map<uint64_t, Block> allocated_;  // returned offset -> carved block
};

}  // namespace symmesh
