#include "daemon/membership.h"

#include <ctime>

namespace symmesh {
namespace {

constexpr int kSuspectAfterMissed = 2;
constexpr int kDownAfterMissed = 3;

// The wall-clock moment of a steady-clock one, for messages and status.
double unix_s(std::chrono::steady_clock::time_point at) {
  const auto offset = std::chrono::system_clock::now().time_since_epoch() -
                      std::chrono::steady_clock::now().time_since_epoch();
  return std::chrono::duration<double>(at.time_since_epoch() + offset).count();
}

std::string clock_text(double unix_seconds) {
  const std::time_t seconds = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof(text), "%H:%M:%S UTC", &utc);
  return text;
}

}  // namespace

const char* node_state_name(NodeState state) {
  switch (state) {
    case NodeState::kJoining:
      return "joining";
    case NodeState::kUp:
      return "up";
    case NodeState::kSuspect:
      return "suspect";
    case NodeState::kDown:
      return "down";
  }
  return "unknown";
}

Membership::Membership(int nodes, int self, std::chrono::milliseconds heartbeat,
                       std::vector<bool> watched)
    : self_(self),
      heartbeat_(heartbeat),
      slots_(nodes),
      watched_(std::move(watched)),
      last_tick_(Clock::now()) {
  const auto now = Clock::now();
  for (auto& slot : slots_) {
    slot.since = slot.last_heard = now;
    slot.since_unix_s = slot.last_heard_unix_s = unix_s(now);
    slot.reason = "not joined yet";
  }
}

std::vector<MembershipChange> Membership::set_locked(int node, NodeState to, const std::string& why,
                                                     Clock::time_point now) {
  NodeSlot& slot = slots_.at(node);
  if (slot.state == to) return {};
  const NodeState from = slot.state;
  slot.state = to;
  slot.since = now;
  slot.since_unix_s = unix_s(now);
  slot.reason = to == NodeState::kUp ? "" : why;
  return {MembershipChange{node, from, to, why}};
}

bool Membership::joining(int node, uint64_t incarnation, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  NodeSlot& slot = slots_.at(node);
  if (incarnation < slot.incarnation) return false;
  slot.incarnation = incarnation;
  slot.link_lost = false;
  slot.last_heard = now;
  slot.last_heard_unix_s = unix_s(now);
  set_locked(node, NodeState::kJoining, "joining", now);
  return true;
}

std::vector<MembershipChange> Membership::formed(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  std::vector<MembershipChange> changes;
  for (int node = 0; node < static_cast<int>(slots_.size()); ++node) {
    NodeSlot& slot = slots_[node];
    if (slot.state != NodeState::kJoining && node != self_) continue;
    slot.last_heard = now;
    slot.last_heard_unix_s = unix_s(now);
    for (auto& change : set_locked(node, NodeState::kUp, "", now)) changes.push_back(change);
  }
  return changes;
}

std::vector<MembershipChange> Membership::heard(int node, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  NodeSlot& slot = slots_.at(node);
  slot.last_heard = now;
  slot.last_heard_unix_s = unix_s(now);
  const bool quiet =
      slot.state == NodeState::kSuspect || (slot.state == NodeState::kDown && !slot.link_lost);
  return quiet ? set_locked(node, NodeState::kUp, "", now) : std::vector<MembershipChange>{};
}

std::vector<MembershipChange> Membership::lost(int node, const std::string& why,
                                               Clock::time_point now) {
  std::lock_guard lock(mutex_);
  NodeSlot& slot = slots_.at(node);
  if (slot.state == NodeState::kDown && slot.link_lost) return {};
  slot.link_lost = true;
  if (slot.state == NodeState::kDown) {  // already down by heartbeat: the cause changes
    slot.reason = why;
    return {};
  }
  return set_locked(node, NodeState::kDown, why, now);
}

std::vector<MembershipChange> Membership::tick(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  std::vector<MembershipChange> changes;
  const bool stalled = now - last_tick_ > heartbeat_ * kSuspectAfterMissed;
  last_tick_ = now;
  for (int node = 0; node < static_cast<int>(slots_.size()); ++node) {
    NodeSlot& slot = slots_[node];
    if (node == self_ || !watched_.at(node)) continue;
    if (stalled) {  // this daemon did not watch: nobody is to blame for that silence
      slot.last_heard = std::max(slot.last_heard, now - heartbeat_);
      continue;
    }
    if (slot.state != NodeState::kUp && slot.state != NodeState::kSuspect) continue;
    const auto silent = now - slot.last_heard;
    const std::string why =
        "no heartbeat for " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
        " ms (one is sent every " + std::to_string(heartbeat_.count()) + " ms)";
    NodeState to = slot.state;
    if (silent > heartbeat_ * kDownAfterMissed) {
      to = NodeState::kDown;
    } else if (silent > heartbeat_ * kSuspectAfterMissed) {
      to = NodeState::kSuspect;
    }
    for (auto& change : set_locked(node, to, why, now)) changes.push_back(change);
  }
  return changes;
}

std::vector<NodeSlot> Membership::slots() const {
  std::lock_guard lock(mutex_);
  return slots_;
}

NodeState Membership::state(int node) const {
  std::lock_guard lock(mutex_);
  return slots_.at(node).state;
}

uint64_t Membership::incarnation(int node) const {
  std::lock_guard lock(mutex_);
  return slots_.at(node).incarnation;
}

bool Membership::all_up() const {
  std::lock_guard lock(mutex_);
  for (const auto& slot : slots_) {
    if (slot.state != NodeState::kUp) return false;
  }
  return true;
}

std::string Membership::problems() const {
  std::lock_guard lock(mutex_);
  std::string text;
  for (int node = 0; node < static_cast<int>(slots_.size()); ++node) {
    const NodeSlot& slot = slots_[node];
    if (slot.state == NodeState::kUp) continue;
    text += (text.empty() ? "" : "; ") + std::string("node ") + std::to_string(node) + " " +
            node_state_name(slot.state) + " since " + clock_text(slot.since_unix_s) + " (" +
            slot.reason + "), last heard " + clock_text(slot.last_heard_unix_s);
  }
  return text;
}

}  // namespace symmesh
