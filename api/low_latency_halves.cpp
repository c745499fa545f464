#include "api/low_latency_halves.h"

#include <string>

#include "common/errors.h"

namespace symmesh {

int LowLatencyHalves::reserve(const Shape& shape) {
  const std::lock_guard lock(mutex_);
  if (shape != shape_) {
    if (holder_[0] != 0 || holder_[1] != 0) {
      throw InvalidArgument(
          "low_latency_dispatch: another shape (hidden, topk, experts, max_tokens or type) while "
          "a dispatch is not yet combined: combine it first");
    }
    shape_ = shape;
    dispatches_ = 0;
  }
  const int half = int(dispatches_ % 2);
  if (holder_[half] == kReserved) {
    throw InvalidArgument("low_latency_dispatch: another thread's dispatch takes this buffer half");
  }
  if (holder_[half] != 0) {
    throw InvalidArgument("low_latency_dispatch: dispatch " + std::to_string(holder_[half]) +
                          ", two dispatches back, is not yet combined: combine it, or drop its "
                          "handle, first (two micro-batches may be in flight, each buffer half "
                          "taken again two dispatches later)");
  }
  holder_[half] = kReserved;
  ++dispatches_;
  return half;
}

void LowLatencyHalves::hold(int half, uint64_t id) {
  const std::lock_guard lock(mutex_);
  holder_[half] = id;
}

void LowLatencyHalves::cancel(int half) {
  const std::lock_guard lock(mutex_);
  holder_[half] = 0;
}

bool LowLatencyHalves::free(uint64_t id) {
  const std::lock_guard lock(mutex_);
  for (uint64_t& holder : holder_) {
    if (holder == id) {
      holder = 0;
      return true;
    }
  }
  return false;
}

}  // namespace symmesh
