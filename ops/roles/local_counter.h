// A counter in a PE's private memory that hands stages and tiles from one role to the other.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "runtime/pe.h"

namespace symmesh {

// A counter in this PE's private memory that one role raises and the other waits on.
class LocalCounter {
 public:
  void add(uint64_t value, Doorbell& bell) {
    value_.fetch_add(value, std::memory_order_release);
    bell.ring();
  }
  void set(uint64_t value, Doorbell& bell) {
    value_.store(value, std::memory_order_release);
    bell.ring();
  }
  uint64_t load() const { return value_.load(std::memory_order_acquire); }
  // Waits until the counter is at least `value`; `what` names it in a timeout.
  void wait_at_least(uint64_t value, Pe& pe, const std::string& what) const;

 private:
  alignas(64) std::atomic<uint64_t> value_{0};
};

}  // namespace symmesh
