// The compute -> comm handoff of gemm-allreduce (PTO's GEMM + AllReduce's per-block ready queue): a
// lock-free single-producer / single-consumer ring of tile ids. Each slot has its own cache line,
// so the producer writing slot i + 1 never invalidates the line the consumer is reading. The
// producer writes the slot, then publishes the count with release; the consumer reads the count
// with acquire, then the slot, and returns the slot with release so the producer may refill it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "transport/wait.h"

namespace symmesh {

class ReadyQueue {
 public:
  // `capacity` is rounded up to a power of two.
  explicit ReadyQueue(uint64_t capacity) {
    capacity_ = 1;
    while (capacity_ < capacity) capacity_ *= 2;
    slots_ = std::make_unique<Slot[]>(capacity_);
  }

  // Producer only. False when the ring is full (the consumer has not caught up).
  bool try_push(int64_t tile) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head_.load(std::memory_order_acquire) == capacity_) return false;
    slots_[tail & (capacity_ - 1)].tile = tile;
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Consumer only. False when nothing is ready.
  bool try_pop(int64_t& tile) {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (tail_.load(std::memory_order_acquire) == head) return false;
    tile = slots_[head & (capacity_ - 1)].tile;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  // Consumer only: anything to pop?
  bool ready() const {
    return tail_.load(std::memory_order_acquire) != head_.load(std::memory_order_relaxed);
  }

  // Producer side, waiting (spin, yield, park on `bell`) while the ring is full.
  void push(int64_t tile, Doorbell& bell, Deadline deadline) {
    if (!try_push(tile)) {
      wait_until(
          bell, deadline, [&] { return try_push(tile); },
          [] { return std::string("ready queue: waiting for the consumer to free a slot"); });
    }
    bell.ring();
  }

 private:
  struct alignas(64) Slot {
    int64_t tile = -1;
  };
  uint64_t capacity_;
  std::unique_ptr<Slot[]> slots_;
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the producer
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the consumer
};

}  // namespace symmesh
