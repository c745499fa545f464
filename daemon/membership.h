// Who is in the cluster, as this daemon sees it: one slot per node rank, each with an
// explicit state, the incarnation of the daemon that holds it, and the heartbeat deadlines
// (in the manner of etcd/raft's progress tracking and SWIM's suspicion):
//
//   joining --formed--> up --(2 heartbeats missed)--> suspect --(3 missed)--> down
//      ^                 ^                                |                     |
//      |                 +----- heard again (same incarnation, link intact) ----+
//      +-- hello (a newer incarnation, or a node re-forming) ---- down (link lost) --+
//
// A node whose link was lost stays down until it joins again; one that only went quiet
// (frozen, or a network stall) comes back by being heard. An older incarnation than the
// slot's is a daemon that was restarted since: it is fenced (its hello refused, its late
// messages dropped). The class is pure logic over a clock it is given, so tests drive time.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "wire/enum_text.h"
#include "wire/jobs.pb.h"

namespace symmesh {

// The states are the wire's (NodeState in jobs.proto), so status reports them as they are.
struct NodeSlot {
  wire::NodeState state = wire::NODE_STATE_JOINING;
  uint64_t incarnation = 0;
  std::chrono::steady_clock::time_point since;       // in this state
  std::chrono::steady_clock::time_point last_heard;  // a heartbeat or any message
  double since_unix_s = 0;
  double last_heard_unix_s = 0;
  bool link_lost = false;
  std::string reason;  // why it is not up
};

struct MembershipChange {
  int node;
  wire::NodeState from;
  wire::NodeState to;
  std::string reason;
};

class Membership {
 public:
  using Clock = std::chrono::steady_clock;
  // `watched`: the nodes whose heartbeats this daemon hears (the root hears every node, a
  // member only the root); the others change state only by joining, forming and being lost.
  Membership(int nodes, int self, std::chrono::milliseconds heartbeat, std::vector<bool> watched);

  // A daemon for `node` said hello with `incarnation`. Returns false, changing nothing, when
  // that incarnation is older than the slot's (a fenced daemon).
  bool joining(int node, uint64_t incarnation, Clock::time_point now);
  // Every node joining is now in the cluster (a formation completed).
  std::vector<MembershipChange> formed(Clock::time_point now);
  // A message from `node`: a quiet node is up again, unless its link was lost.
  std::vector<MembershipChange> heard(int node, Clock::time_point now);
  // The link to `node` is gone (or a transport failed to it): down until it joins again.
  std::vector<MembershipChange> lost(int node, const std::string& why, Clock::time_point now);
  // Applies the heartbeat deadlines; call at least every heartbeat/4. A tick that comes late
  // (this daemon was itself stalled or stopped) forgives the silence it did not watch.
  std::vector<MembershipChange> tick(Clock::time_point now);

  std::vector<NodeSlot> slots() const;
  wire::NodeState state(int node) const;
  // The incarnation the slot holds (0 before its first join).
  uint64_t incarnation(int node) const;
  bool all_up() const;
  // The nodes that are not up, each with its state, why, since when and when last heard;
  // empty when all are.
  std::string problems() const;

 private:
  std::vector<MembershipChange> set_locked(int node, wire::NodeState to, const std::string& why,
                                           Clock::time_point now);

  const int self_;
  const std::chrono::milliseconds heartbeat_;
  mutable std::mutex mutex_;
  std::vector<NodeSlot> slots_;
  const std::vector<bool> watched_;
  Clock::time_point last_tick_;
};

}  // namespace symmesh
