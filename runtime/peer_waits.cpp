#include "runtime/peer_waits.h"

namespace symmesh {

PeerWaits::PeerWaits(int n_pes)
    : n_pes_(n_pes), nanoseconds_(std::make_unique<std::atomic<uint64_t>[]>(n_pes)) {}

void PeerWaits::add(int peer, std::chrono::nanoseconds blocked) {
  const auto nanoseconds = uint64_t(blocked.count());
  total_nanoseconds_.fetch_add(nanoseconds, std::memory_order_relaxed);
  if (peer >= 0 && peer < n_pes_)
    nanoseconds_[peer].fetch_add(nanoseconds, std::memory_order_relaxed);
}

std::vector<double> PeerWaits::seconds() const {
  std::vector<double> out(n_pes_);
  for (int p = 0; p < n_pes_; ++p) {
    out[p] = double(nanoseconds(p)) * 1e-9;
  }
  return out;
}

double PeerWaits::blocked_seconds() const {
  return double(total_nanoseconds()) * 1e-9;
}

uint64_t PeerWaits::nanoseconds(int peer) const {
  return peer >= 0 && peer < n_pes_ ? nanoseconds_[peer].load(std::memory_order_relaxed) : 0;
}

uint64_t PeerWaits::total_nanoseconds() const {
  return total_nanoseconds_.load(std::memory_order_relaxed);
}

void PeerWaits::call_ended(std::string_view op, uint64_t blocked_ns_at_start) {
  const double seconds = double(total_nanoseconds() - blocked_ns_at_start) * 1e-9;
  std::lock_guard lock(calls_mutex_);
  auto it = calls_.find(op);
  if (it == calls_.end()) {
    it = calls_.emplace(std::string(op), Histogram{}).first;
    it->second.bounds = kCallWaitBounds;
  }
  it->second.observe(seconds);
}

PeerWaits::CallHistograms PeerWaits::calls() const {
  std::lock_guard lock(calls_mutex_);
  return calls_;
}

}  // namespace symmesh
