#include "transport/wait.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <thread>

namespace symmesh {
namespace {

long futex(const std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), op, value, timeout, nullptr,
                 0);
}

timespec timeout_of(std::chrono::nanoseconds sleep) {
  return timespec{static_cast<time_t>(sleep.count() / 1'000'000'000),
                  static_cast<long>(sleep.count() % 1'000'000'000)};
}

}  // namespace

void wait_shared(const std::atomic<uint32_t>& word, uint32_t seen,
                 std::chrono::nanoseconds max_sleep) {
  if (max_sleep.count() <= 0) return;
  const timespec timeout = timeout_of(max_sleep);
  futex(&word, FUTEX_WAIT, seen, &timeout);
}

void wake_shared(std::atomic<uint32_t>& word) {
  futex(&word, FUTEX_WAKE, INT_MAX, nullptr);
}

void Doorbell::ring() {
  sequence_.fetch_add(1, std::memory_order_seq_cst);
  if (parked_.load(std::memory_order_seq_cst) > 0) {
    futex(&sequence_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr);
  }
}

void Doorbell::park(uint32_t seen, std::chrono::nanoseconds max_sleep) {
  if (max_sleep.count() <= 0) return;
  const timespec timeout = timeout_of(max_sleep);
  parked_.fetch_add(1, std::memory_order_seq_cst);
  futex(&sequence_, FUTEX_WAIT_PRIVATE, seen, &timeout);
  parked_.fetch_sub(1, std::memory_order_seq_cst);
}

void Doorbell::abort(const std::string& reason) {
  {
    // The flag with its reason, so a clear_abort() never leaves one without the other.
    std::lock_guard lock(reason_mutex_);
    if (!aborted_.load(std::memory_order_relaxed)) reason_ = reason;
    aborted_.store(true, std::memory_order_release);
  }
  ring();
}

void Doorbell::clear_abort() {
  std::lock_guard lock(reason_mutex_);
  reason_.clear();
  aborted_.store(false, std::memory_order_release);
}

std::string Doorbell::abort_reason() const {
  std::lock_guard lock(reason_mutex_);
  return reason_;
}

}  // namespace symmesh
