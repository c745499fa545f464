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

std::vector<MembershipChange> Membership::set_locked(int node, wire::NodeState to,
                                                     const std::string& why,
                                                     Clock::time_point now) {
  NodeSlot& slot = slots_.at(node);
  if (slot.state == to) return {};
  const wire::NodeState from = slot.state;
  slot.state = to;
  slot.since = now;
  slot.since_unix_s = unix_s(now);
  slot.reason = to == wire::NODE_STATE_UP ? "" : why;
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
  set_locked(node, wire::NODE_STATE_JOINING, "joining", now);
  return true;
}

std::vector<MembershipChange> Membership::formed(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  std::vector<MembershipChange> changes;
  for (int node = 0; node < static_cast<int>(slots_.size()); ++node) {
    NodeSlot& slot = slots_[node];
    if (slot.state != wire::NODE_STATE_JOINING && node != self_) continue;
    slot.last_heard = now;
    slot.last_heard_unix_s = unix_s(now);
    for (auto& change : set_locked(node, wire::NODE_STATE_UP, "", now)) changes.push_back(change);
  }
  return changes;
}

std::vector<MembershipChange> Membership::heard(int node, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  NodeSlot& slot = slots_.at(node);
  slot.last_heard = now;
  slot.last_heard_unix_s = unix_s(now);
  const bool quiet = slot.state == wire::NODE_STATE_SUSPECT ||
                     (slot.state == wire::NODE_STATE_DOWN && !slot.link_lost);
  return quiet ? set_locked(node, wire::NODE_STATE_UP, "", now) : std::vector<MembershipChange>{};
}

std::vector<MembershipChange> Membership::lost(int node, const std::string& why,
                                               Clock::time_point now) {
  std::lock_guard lock(mutex_);
  NodeSlot& slot = slots_.at(node);
  if (slot.state == wire::NODE_STATE_DOWN && slot.link_lost) return {};
  slot.link_lost = true;
  if (slot.state == wire::NODE_STATE_DOWN) {  // already down by heartbeat: the cause changes
    slot.reason = why;
    return {};
  }
  return set_locked(node, wire::NODE_STATE_DOWN, why, now);
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
    if (slot.state != wire::NODE_STATE_UP && slot.state != wire::NODE_STATE_SUSPECT) continue;
    const auto silent = now - slot.last_heard;
    const std::string why =
        "no heartbeat for " +
        std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
        " ms (one is sent every " + std::to_string(heartbeat_.count()) + " ms)";
    wire::NodeState to = slot.state;
    if (silent > heartbeat_ * kDownAfterMissed) {
      to = wire::NODE_STATE_DOWN;
    } else if (silent > heartbeat_ * kSuspectAfterMissed) {
      to = wire::NODE_STATE_SUSPECT;
    }
    for (auto& change : set_locked(node, to, why, now)) changes.push_back(change);
  }
  return changes;
}

std::vector<NodeSlot> Membership::slots() const {
  std::lock_guard lock(mutex_);
  return slots_;
}

wire::NodeState Membership::state(int node) const {
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
    if (slot.state != wire::NODE_STATE_UP) return false;
  }
  return true;
}

std::string Membership::problems() const {
  std::lock_guard lock(mutex_);
  std::string text;
  for (int node = 0; node < static_cast<int>(slots_.size()); ++node) {
    const NodeSlot& slot = slots_[node];
    if (slot.state == wire::NODE_STATE_UP) continue;
    text += (text.empty() ? "" : "; ") + std::string("node ") + std::to_string(node) + " " +
            wire::enum_text(slot.state) + " since " + clock_text(slot.since_unix_s) + " (" +
            slot.reason + "), last heard " + clock_text(slot.last_heard_unix_s);
  }
  return text;
}

}  // namespace symmesh
