// What this node exchanged with each peer node, as the network transports count it for the
// status endpoint's metrics: operations it started (puts, gets, atomics) with the bytes they
// carried out, and the bytes that came in (a peer's puts applied here, the data of this node's
// gets). One-sided RDMA writes into this node pass no CPU here, so over verbs only what this
// node started is seen. Counting is a relaxed atomic add per operation.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace symmesh {

class PeerTraffic {
 public:
  struct Totals {
    uint64_t sent_bytes = 0, sent_ops = 0, received_bytes = 0, received_ops = 0;
  };

  explicit PeerTraffic(int nodes) : counters_(std::make_unique<Counters[]>(size_t(nodes))) {}
  void sent(int node, uint64_t bytes) {
    counters_[node].sent_bytes.fetch_add(bytes, std::memory_order_relaxed);
    counters_[node].sent_ops.fetch_add(1, std::memory_order_relaxed);
  }
  void received(int node, uint64_t bytes) {
    counters_[node].received_bytes.fetch_add(bytes, std::memory_order_relaxed);
    counters_[node].received_ops.fetch_add(1, std::memory_order_relaxed);
  }
  Totals totals(int node) const {
    const Counters& c = counters_[node];
    return {c.sent_bytes.load(std::memory_order_relaxed),
            c.sent_ops.load(std::memory_order_relaxed),
            c.received_bytes.load(std::memory_order_relaxed),
            c.received_ops.load(std::memory_order_relaxed)};
  }

 private:
  struct Counters {
    std::atomic<uint64_t> sent_bytes{0}, sent_ops{0}, received_bytes{0}, received_ops{0};
  };
  std::unique_ptr<Counters[]> counters_;
};

}  // namespace symmesh
