// Whether each peer node is reachable, as a network transport sees it: up until the first
// failure, then down for good with the reason (a transport never reuses a failed link; the
// daemon re-forms the cluster with new transports). One table for every transport, read on
// each operation without a lock and written once per lost peer.
//
// A first report may be a consequence rather than the cause: over verbs, the requests behind
// a failed one are flushed, and the flush can be seen before the failure. A report marked as
// the cause replaces such a consequence, so the reason kept names what went wrong.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace symmesh {

class PeerHealth {
 public:
  using DownCallback = std::function<void(int node, const std::string& why)>;

  explicit PeerHealth(int nodes);

  bool up(int node) const { return !down_[node].load(std::memory_order_acquire); }
  // Empty while `node` is up.
  std::string reason(int node) const;
  // Throws PeerError "<who()> is down: <reason>" when `node` is down. `who` is called only
  // then: checks sit on every operation, and naming a peer costs an allocation.
  template <class Who>
  void check(int node, Who&& who) const {
    if (!up(node)) throw_down(node, who());
  }
  [[noreturn]] void throw_down(int node, const std::string& who) const;

  // Marks `node` down. Returns true when this call took it down: the caller then calls
  // announce() once it has failed what waited on the peer. A later report replaces the
  // reason only when it is the `cause` and the first was not.
  bool mark_down(int node, const std::string& why, bool cause = true);
  // The callback hears of each lost peer once: one lost before it was set, at once.
  void on_down(DownCallback callback);
  void announce(int node, const std::string& why);

 private:
  std::unique_ptr<std::atomic<bool>[]> down_;
  mutable std::mutex mutex_;
  std::vector<std::string> reasons_;
  std::vector<bool> is_cause_;
  std::vector<bool> announced_;  // the callback heard of it
  DownCallback callback_;
};

}  // namespace symmesh
