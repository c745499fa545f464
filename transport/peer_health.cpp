#include "transport/peer_health.h"

#include <spdlog/spdlog.h>

#include "common/errors.h"

namespace symmesh {

PeerHealth::PeerHealth(int nodes)
    : down_(std::make_unique<std::atomic<bool>[]>(size_t(nodes))),
      reasons_(size_t(nodes)),
      is_cause_(size_t(nodes), false),
      announced_(size_t(nodes), false) {}

std::string PeerHealth::reason(int node) const {
  std::lock_guard lock(mutex_);
  return reasons_.at(size_t(node));
}

void PeerHealth::throw_down(int node, const std::string& who) const {
  throw PeerError(who + " is down: " + reason(node));
}

bool PeerHealth::mark_down(int node, const std::string& why, bool cause) {
  std::lock_guard lock(mutex_);
  std::string& reason = reasons_.at(size_t(node));
  if (!reason.empty()) {
    if (cause && !is_cause_[node]) {
      reason = why;
      is_cause_[node] = true;
      spdlog::error("node {}: the cause: {}", node, why);
    }
    return false;
  }
  reason = why;
  is_cause_[node] = cause;
  down_[node].store(true, std::memory_order_release);
  return true;
}

void PeerHealth::on_down(DownCallback callback) {
  std::vector<std::pair<int, std::string>> missed;  // went down before anyone listened
  {
    std::lock_guard lock(mutex_);
    callback_ = callback;
    for (size_t node = 0; callback_ && node < reasons_.size(); ++node) {
      if (reasons_[node].empty() || announced_[node]) continue;
      announced_[node] = true;
      missed.emplace_back(int(node), reasons_[node]);
    }
  }
  for (const auto& [node, why] : missed) callback(node, why);
}

void PeerHealth::announce(int node, const std::string& why) {
  DownCallback callback;
  {
    std::lock_guard lock(mutex_);
    if (!callback_ || announced_.at(size_t(node))) return;
    announced_[size_t(node)] = true;
    callback = callback_;
  }
  callback(node, why);
}

}  // namespace symmesh
