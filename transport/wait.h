// Waiting without burning the CPU (docs/ARCHITECTURE.md, "Waiting"): spin briefly, then yield,
// then park on the node's doorbell with a deadline. Whoever changes memory that a PE may be
// waiting on (a local put, a TCP receive, an abort) rings the doorbell.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
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
  std::atomic<bool> aborted_{false};
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
  for (const auto until = Clock::now() + policy.yield_for; Clock::now() < until;) {
    if (word.load(std::memory_order_acquire) != seen) return;
    std::this_thread::yield();
  }
  while (word.load(std::memory_order_acquire) == seen) {
    check();
    wait_shared(word, seen, slice);
  }
}

// Returns when ready() is true. Throws TimeoutError (with describe()) at the deadline and
// AbortedError when the doorbell is aborted.
template <class Ready, class Describe>
void wait_until(Doorbell& bell, Deadline deadline, Ready&& ready, Describe&& describe,
                const WaitPolicy& policy = WaitPolicy{}) {
  for (int i = 0; i < policy.spins; ++i) {
    if (ready()) return;
    cpu_relax();
  }
  const trace::Scope waited("wait", "wait");  // only waits that outlast the spin
  for (const auto yield_until = Clock::now() + policy.yield_for; Clock::now() < yield_until;) {
    if (ready()) return;
    std::this_thread::yield();
  }
  for (;;) {
    const uint32_t seen = bell.sequence();
    if (ready()) return;
    if (policy.abortable && bell.aborted())
      throw AbortedError(describe() + ": aborted: " + bell.abort_reason());
    const auto now = Clock::now();
    if (now >= deadline) throw TimeoutError(describe() + ": deadline passed");
    bell.park(seen, std::min<std::chrono::nanoseconds>(deadline - now, policy.max_park));
  }
}

}  // namespace symmesh
