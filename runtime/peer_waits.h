// How long one PE waited: the time its waits for a word only one peer writes (its data landing,
// its signal, its entering a call) blocked, summed per peer (DeepEP keeps the same figure per
// rank as `dispatch_wait_recv_cost_stats`), and all the time it blocked, including waits for
// words several peers write. A slow PE is the one that hardly waits while the others do: in a
// ring or a tree the others may wait for it through a neighbour that waits for it. Any thread
// of the PE may add (a fused operator's comm threads wait at once); reading takes a snapshot.
// Each call (a collective, a dispatch, a combine, an attached process's op) also adds the time
// it blocked in all to a histogram of its op: how the waits spread over calls.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "common/histogram.h"

namespace symmesh {

// The per-call histogram's upper bounds, in seconds.
inline const std::vector<double> kCallWaitBounds = {1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1, 10};

class PeerWaits {
 public:
  explicit PeerWaits(int n_pes);

  // A wait that blocked for `blocked`, ended by `peer` (-1: by several).
  void add(int peer, std::chrono::nanoseconds blocked);
  // Seconds blocked on each peer since this PE started (index: the peer's PE).
  std::vector<double> seconds() const;
  // Seconds blocked in every wait, whoever ended it.
  double blocked_seconds() const;
  uint64_t nanoseconds(int peer) const;  // 0 for no such peer
  uint64_t total_nanoseconds() const;

  // A call of `op` ended that began when total_nanoseconds() was `blocked_ns_at_start`.
  void call_ended(std::string_view op, uint64_t blocked_ns_at_start);
  // Per op: the calls by the seconds they blocked (kCallWaitBounds).
  using CallHistograms = std::map<std::string, Histogram, std::less<>>;
  CallHistograms calls() const;

 private:
  int n_pes_;
  std::unique_ptr<std::atomic<uint64_t>[]> nanoseconds_;  // per peer
  std::atomic<uint64_t> total_nanoseconds_{0};
  mutable std::mutex calls_mutex_;  // once per call, never per wait
  CallHistograms calls_;
};

// Counts the time a wait blocks when it ends, by the word, a timeout or an abort, as `peer`'s
// (a peer that never wrote is the one to blame; -1: several could end it).
class BlockedOn {
 public:
  BlockedOn(PeerWaits& waits, int peer) : waits_(waits), peer_(peer), since_(Clock::now()) {}
  ~BlockedOn() { waits_.add(peer_, Clock::now() - since_); }
  BlockedOn(const BlockedOn&) = delete;
  BlockedOn& operator=(const BlockedOn&) = delete;

 private:
  using Clock = std::chrono::steady_clock;
  PeerWaits& waits_;
  int peer_;
  Clock::time_point since_;
};

// One call of `op` on the PE whose waits these are, counted into its histogram when it ends
// (by returning or by throwing). `op`, which outlives the call, is its name in /metrics:
// allreduce, dispatch, ...
class CountedCall {
 public:
  CountedCall(PeerWaits& waits, std::string_view op)
      : waits_(waits), op_(op), blocked_ns_at_start_(waits.total_nanoseconds()) {}
  ~CountedCall() { waits_.call_ended(op_, blocked_ns_at_start_); }
  CountedCall(const CountedCall&) = delete;
  CountedCall& operator=(const CountedCall&) = delete;

 private:
  PeerWaits& waits_;
  std::string_view op_;
  uint64_t blocked_ns_at_start_;
};

}  // namespace symmesh
