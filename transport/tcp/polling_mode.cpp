#include "transport/tcp/polling_mode.h"

namespace symmesh {

PollingMode::PollingMode(asio::io_context& io, std::function<void(bool raised)> set_marks)
    : set_marks_(std::move(set_marks)), timer_(io) {}

void PollingMode::start_polling() {
  pollers_.fetch_add(1);
  starts_.fetch_add(1, std::memory_order_relaxed);
  if (raised_.load() || parked_.load() > 0) return;
  std::lock_guard lock(mutex_);
  // parked_ is read again under the lock: a PE that parks counts itself, then lowers under it.
  if (raised_.load() || parked_.load() > 0 || stopped_) return;
  set_marks_(true);
  raised_.store(true);
  if (!ticking_) {
    ticking_ = true;
    starts_seen_ = starts_.load(std::memory_order_relaxed);
    arm_tick();
  }
}

void PollingMode::stop_polling() {
  pollers_.fetch_sub(1);
}

void PollingMode::start_parking() {
  parked_.fetch_add(1);
  // Under the lock even when the marks look lowered: a raise in progress (it read parked_
  // before this count) stores raised_ only after setting the marks.
  std::lock_guard lock(mutex_);
  lower();
}

void PollingMode::stop_parking() {
  parked_.fetch_sub(1);
}

void PollingMode::with_mode(const std::function<void(bool raised)>& with) {
  std::lock_guard lock(mutex_);
  with(raised_.load());
}

void PollingMode::lower() {
  if (!raised_.load()) return;
  set_marks_(false);
  raised_.store(false);
}

void PollingMode::arm_tick() {
  // The timer is only touched under mutex_ (here, from a PE or from its own handler).
  timer_.expires_after(kTick);
  timer_.async_wait([this](const asio::error_code&) { tick(); });
}

void PollingMode::tick() {
  std::lock_guard lock(mutex_);
  const uint64_t starts = starts_.load(std::memory_order_relaxed);
  if (stopped_ || (pollers_.load() == 0 && starts == starts_seen_)) lower();
  starts_seen_ = starts;
  if (!raised_.load()) {
    ticking_ = false;
    return;
  }
  arm_tick();
}

void PollingMode::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  lower();
}

}  // namespace symmesh
