// How long one PE waited: the time its waits for a word only one peer writes (its data landing,
// its signal, its entering a call) blocked, summed per peer (DeepEP keeps the same figure per
// rank as `dispatch_wait_recv_cost_stats`), and all the time it blocked, including waits for
// words several peers write. A slow PE is the one that hardly waits while the others do: in a
// ring or a tree the others may wait for it through a neighbour that waits for it. Any thread
// of the PE may add (a fused operator's comm threads wait at once); reading takes a snapshot.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

namespace symmesh {

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

 private:
  int n_pes_;
  std::unique_ptr<std::atomic<uint64_t>[]> nanoseconds_;  // per peer
  std::atomic<uint64_t> total_nanoseconds_{0};
};

}  // namespace symmesh
