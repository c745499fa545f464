// Waiting without burning the CPU (docs/ARCHITECTURE.md, "Waiting"): spin briefly, then yield,
// then park on the node's doorbell with a deadline. Whoever changes memory that a PE may be
// waiting on (a local put, a TCP receive, an abort) rings the doorbell.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/errors.h"
#include "common/trace.h"

namespace symmesh {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadline_after(std::chrono::milliseconds timeout) {
  return Clock::now() + timeout;
}

// An event count over a futex: waiters read sequence(), check their condition, and park
// only if the sequence has not moved since, so a ring between the check and the park is
// never lost. It also carries the abort state of the job running on this node.
class Doorbell {
 public:
  uint32_t sequence() const { return sequence_.load(std::memory_order_seq_cst); }
  void ring();
  // Sleeps until the sequence moves past `seen`, a ring arrives, or `max_sleep` passes.
  void park(uint32_t seen, std::chrono::nanoseconds max_sleep);

  void abort(const std::string& reason);
  void clear_abort();
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  std::string abort_reason() const;

 private:
  alignas(64) std::atomic<uint32_t> sequence_{0};
  alignas(64) std::atomic<uint32_t> parked_{0};
  alignas(64) std::atomic<bool> aborted_{false};  // read by every one-sided operation
  mutable std::mutex reason_mutex_;
  std::string reason_;
};

inline void cpu_relax() {
  __builtin_ia32_pause();
}

// A futex on a word in memory that several processes map (FUTEX_WAIT without the private
// flag): sleeps while `word` still holds `seen`, at most `max_sleep`; wake_shared wakes every
// sleeper on it.
void wait_shared(const std::atomic<uint32_t>& word, uint32_t seen,
                 std::chrono::nanoseconds max_sleep);
void wake_shared(std::atomic<uint32_t>& word);

// What a waiting thread can drive between checks: reading the frames the network brought
// (the tcp transport's connections), so the data a PE waits for is applied by that PE, which
// is already running, not by an io thread that has to be scheduled first.
class WaitProgress {
 public:
  // A thread begins polling, and ends (it found its condition, or it is about to park).
  virtual void start_polling() = 0;
  virtual void stop_polling() = 0;
  // Reads and applies what arrived; true when it applied anything (the condition is worth
  // checking again at once).
  virtual bool poll() = 0;
  // A thread parks on the doorbell, and wakes: while it sleeps it needs the io threads.
  virtual void start_parking() = 0;
  virtual void stop_parking() = 0;

 protected:
  ~WaitProgress() = default;
};

// A phase of a wait (polling or parked) from its start to its end, even when a check throws.
template <void (WaitProgress::*Start)(), void (WaitProgress::*Stop)()>
class WaitPhase {
 public:
  explicit WaitPhase(WaitProgress* progress) : progress_(progress) {
    if (progress_) (progress_->*Start)();
  }
  ~WaitPhase() {
    if (progress_) (progress_->*Stop)();
  }
  WaitPhase(const WaitPhase&) = delete;
  WaitPhase& operator=(const WaitPhase&) = delete;

 private:
  WaitProgress* progress_;
};
using PollingPhase = WaitPhase<&WaitProgress::start_polling, &WaitProgress::stop_polling>;
using ParkedPhase = WaitPhase<&WaitProgress::start_parking, &WaitProgress::stop_parking>;

// On a machine with more runnable threads than cores (several ranks and io threads per
// node, several nodes per host in tests) spinning steals the core from the thread being
// waited for, so the spin is short and yielding, which hands the core over, does the rest.
struct WaitPolicy {
  int spins = 64;
  std::chrono::microseconds yield_for{50};
  // A parked waiter re-checks at least this often (memory written by RDMA rings no bell).
  std::chrono::microseconds max_park{2000};
  // False for waits that must outlive an abort (a borrowed buffer still being written).
  bool abortable = true;
  // Driven between checks while yielding (none: only yield).
  WaitProgress* progress = nullptr;
};

// Yields the CPU between checks of ready() for about `yield_for` (at least 16 checks when it
// is not zero), first polling `progress` if there is one (no yield when that applied
// something); true once ready() was.
// The clock is read once per kYieldsPerClockRead checks, not at each: where the clock source
// is not the TSC (an emulated HPET in a virtual machine) a read is a system call of
// microseconds, and a waiter reading it at every check also notices the change that much later.
inline constexpr int kYieldsPerClockRead = 8;
template <class Ready>
bool yield_until(Ready&& ready, std::chrono::microseconds yield_for,
                 WaitProgress* progress = nullptr) {
  if (yield_for.count() <= 0) return false;
  for (std::optional<Deadline> until;;) {
    for (int i = 0; i < kYieldsPerClockRead; ++i) {
      if (ready()) return true;
      if (!progress || !progress->poll()) std::this_thread::yield();
    }
    const auto now = Clock::now();
    if (!until) {
      until = now + yield_for;
    } else if (now >= *until) {
      return false;
    }
  }
}

// A deadline, or a timeout whose deadline is fixed when a wait first needs it (when it
// parks), so a wait that ends while spinning or yielding reads no clock for it.
class WaitDeadline {
 public:
  WaitDeadline(Deadline at) : at_(at) {}  // NOLINT: a Deadline is a WaitDeadline
  WaitDeadline(std::chrono::milliseconds timeout) : timeout_(timeout) {}  // NOLINT: so is a timeout
  Deadline get() {
    if (!at_) at_ = Clock::now() + timeout_;
    return *at_;
  }

 private:
  std::optional<Deadline> at_;
  std::chrono::milliseconds timeout_{0};
};

// The deadline of one operation made of several waits (a put cut into many writes, each of
// which may wait briefly for space): fixed by its first wait that lasts, or at its second
// wait, then read at the start of each later wait, so the whole operation ends within about
// one timeout, and an operation that never waits reads no clock. Given a doorbell, the
// operation also ends at its abort (for operations that no longer need the caller's memory
// once they wait: an aborted job's PEs stop at once).
class OperationDeadline {
 public:
  OperationDeadline(std::chrono::milliseconds timeout) : deadline_(timeout) {}  // NOLINT
  OperationDeadline(Deadline at) : deadline_(at) {}                             // NOLINT
  OperationDeadline(std::chrono::milliseconds timeout, const Doorbell& aborts)
      : deadline_(timeout), aborts_(&aborts) {}
  // At a wait's start: true when this is not the operation's first wait and the deadline
  // has passed.
  bool passed_at_wait() { return waits_++ > 0 && passed(); }
  // During a wait that lasts.
  bool passed() {
    const Deadline at = deadline_.get();  // fixed first: a clock read after it is not earlier
    return Clock::now() >= at;
  }
  // Whether the doorbell given was aborted, and why.
  bool aborted() const { return aborts_ && aborts_->aborted(); }
  std::string abort_reason() const { return aborts_ ? aborts_->abort_reason() : std::string(); }

 private:
  WaitDeadline deadline_;
  const Doorbell* aborts_ = nullptr;
  int waits_ = 0;
};

// Waits until `word` no longer holds `seen`, between processes, with the wait policy's spin
// and yield, then sleeps on the shared futex in slices of `slice`, calling `check()` before
// each sleep (it throws to give up: a dead peer, an abort, a deadline).
template <class Check>
void wait_for_change(const std::atomic<uint32_t>& word, uint32_t seen, Check&& check,
                     const WaitPolicy& policy = WaitPolicy{},
                     std::chrono::milliseconds slice = std::chrono::milliseconds(50)) {
  for (int i = 0; i < policy.spins; ++i) {
    if (word.load(std::memory_order_acquire) != seen) return;
    cpu_relax();
  }
  if (yield_until([&] { return word.load(std::memory_order_acquire) != seen; }, policy.yield_for))
    return;
  while (word.load(std::memory_order_acquire) == seen) {
    check();
    wait_shared(word, seen, slice);
  }
}

// Returns when ready() is true. Throws TimeoutError (with describe()) at the deadline and
// AbortedError when the doorbell is aborted. `peer`: the PE whose write ends the wait, for the
// trace (-1: none, or several).
template <class Ready, class Describe>
void wait_until(Doorbell& bell, WaitDeadline deadline, Ready&& ready, Describe&& describe,
                const WaitPolicy& policy = WaitPolicy{}, int peer = -1) {
  for (int i = 0; i < policy.spins; ++i) {
    if (ready()) return;
    cpu_relax();
  }
  const trace::Scope waited("wait", "wait", peer);  // only waits that outlast the spin
  {
    // No polling phase for a wait that does not yield (it would only raise and lower marks).
    const PollingPhase polling(policy.yield_for.count() > 0 ? policy.progress : nullptr);
    if (yield_until(ready, policy.yield_for, policy.progress)) return;
  }
  const ParkedPhase parked(policy.progress);
  for (;;) {
    const uint32_t seen = bell.sequence();
    if (ready()) return;
    if (policy.abortable && bell.aborted())
      throw AbortedError(describe() + ": aborted: " + bell.abort_reason());
    const Deadline at = deadline.get();
    const auto now = Clock::now();
    if (now >= at) throw TimeoutError(describe() + ": deadline passed");
    bell.park(seen, std::min<std::chrono::nanoseconds>(at - now, policy.max_park));
  }
}

}  // namespace symmesh
