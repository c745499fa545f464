// A fused operator's comm threads share their PE through a CommPort.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "runtime/pe.h"

namespace symmesh {

// The PE's one-sided operations for several comm threads: one at a time, with the bytes sent
// to other PEs counted for the wire figure. Once the node is aborted no operation starts (the
// PE's own rule): it throws AbortedError.
class CommPort {
 public:
  explicit CommPort(Pe& pe) : pe_(pe) {}
  Pe& pe() { return pe_; }
  void put(void* dest, const void* source, size_t bytes, int pe);
  void get(void* dest, const void* source, size_t bytes, int pe);
  void put_signal(void* dest, const void* source, size_t bytes, uint64_t* signal, uint64_t value,
                  SignalOp op, int pe);
  void signal_set(uint64_t* signal, uint64_t value, int pe);
  void signal_add(uint64_t* signal, uint64_t value, int pe);
  void quiet();
  uint64_t wire_bytes() const { return wire_bytes_.load(std::memory_order_relaxed); }

 private:
  void count(size_t bytes, int pe);
  Pe& pe_;
  std::mutex mutex_;
  std::atomic<uint64_t> wire_bytes_{0};
};

}  // namespace symmesh
