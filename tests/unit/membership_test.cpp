// The membership state machine with a clock the test drives: heartbeat deadlines, a lost
// link, a revived node, a fenced incarnation, and a daemon that was itself stalled.
#include "daemon/membership.h"

#include <gtest/gtest.h>

#include <memory>

namespace symmesh {
namespace {

using namespace std::chrono_literals;
using Clock = Membership::Clock;

constexpr auto kBeat = 1000ms;

// A root's view of three nodes, formed at `t0`.
std::unique_ptr<Membership> formed_root(Clock::time_point t0) {
  auto m = std::make_unique<Membership>(3, 0, kBeat, std::vector<bool>{false, true, true});
  for (int node = 0; node < 3; ++node) EXPECT_TRUE(m->joining(node, 100 + node, t0));
  m->formed(t0);
  return m;
}

// Ticks every quarter beat from `from` to `to`, as the daemon's monitor does.
std::vector<MembershipChange> tick_until(Membership& m, Clock::time_point from,
                                         Clock::time_point to) {
  std::vector<MembershipChange> all;
  for (auto t = from; t <= to; t += kBeat / 4) {
    for (auto& change : m.tick(t)) all.push_back(change);
  }
  return all;
}

TEST(Membership, FormingMakesEveryJoiningNodeUp) {
  const auto t0 = Clock::now();
  const auto owned = formed_root(t0);
  Membership& m = *owned;
  EXPECT_TRUE(m.all_up());
  EXPECT_EQ(m.problems(), "");
  EXPECT_EQ(m.slots()[2].incarnation, 102u);
}

TEST(Membership, ASilentNodeIsSuspectAfterTwoBeatsAndDownAfterThree) {
  const auto t0 = Clock::now();
  const auto owned = formed_root(t0);
  Membership& m = *owned;
  // Node 2 keeps talking, node 1 goes quiet.
  for (auto t = t0; t <= t0 + 4 * kBeat; t += kBeat / 4) {
    m.heard(2, t);
    m.tick(t);
    if (t <= t0 + 2 * kBeat) {
      EXPECT_EQ(m.state(1), wire::NODE_STATE_UP);
    } else if (t > t0 + 2 * kBeat + kBeat / 4 && t <= t0 + 3 * kBeat) {
      EXPECT_EQ(m.state(1), wire::NODE_STATE_SUSPECT);
    }
  }
  EXPECT_EQ(m.state(1), wire::NODE_STATE_DOWN);
  EXPECT_EQ(m.state(2), wire::NODE_STATE_UP);
  EXPECT_FALSE(m.all_up());
  const std::string problems = m.problems();
  EXPECT_NE(problems.find("node 1 down since"), std::string::npos) << problems;
  EXPECT_NE(problems.find("no heartbeat for"), std::string::npos) << problems;
  EXPECT_NE(problems.find("last heard"), std::string::npos) << problems;
}

TEST(Membership, AQuietNodeHeardAgainIsUpButALostLinkStaysDownUntilItJoins) {
  const auto t0 = Clock::now();
  const auto owned = formed_root(t0);
  Membership& m = *owned;
  tick_until(m, t0, t0 + 4 * kBeat);
  ASSERT_EQ(m.state(1), wire::NODE_STATE_DOWN);
  const auto revived = m.heard(1, t0 + 5 * kBeat);  // a frozen daemon thawed
  ASSERT_EQ(revived.size(), 1u);
  EXPECT_EQ(revived[0].from, wire::NODE_STATE_DOWN);
  EXPECT_EQ(m.state(1), wire::NODE_STATE_UP);
  EXPECT_EQ(m.state(2), wire::NODE_STATE_DOWN);  // both went quiet; only node 1 came back

  m.lost(2, "link closed", t0 + 5 * kBeat);
  EXPECT_EQ(m.state(2), wire::NODE_STATE_DOWN);
  m.heard(2, t0 + 6 * kBeat);  // a late message of the old link changes nothing
  EXPECT_EQ(m.state(2), wire::NODE_STATE_DOWN);
  EXPECT_TRUE(m.joining(2, 200, t0 + 7 * kBeat));
  EXPECT_EQ(m.state(2), wire::NODE_STATE_JOINING);
  m.formed(t0 + 8 * kBeat);
  EXPECT_EQ(m.state(2), wire::NODE_STATE_UP);
  EXPECT_EQ(m.slots()[2].incarnation, 200u);
}

TEST(Membership, AnOlderIncarnationIsFenced) {
  const auto t0 = Clock::now();
  const auto owned = formed_root(t0);
  Membership& m = *owned;
  EXPECT_TRUE(m.joining(1, 500, t0));
  EXPECT_FALSE(m.joining(1, 499, t0)) << "an older daemon for the slot must be refused";
  EXPECT_EQ(m.slots()[1].incarnation, 500u);
}

TEST(Membership, ADaemonThatWasItselfStalledBlamesNobody) {
  const auto t0 = Clock::now();
  const auto owned = formed_root(t0);
  Membership& m = *owned;
  m.tick(t0);
  // No tick for ten beats (this daemon was stopped), then ticks resume with nodes talking.
  const auto changes = m.tick(t0 + 10 * kBeat);
  EXPECT_TRUE(changes.empty());
  EXPECT_TRUE(m.all_up());
}

TEST(Membership, AMemberWatchesOnlyTheRoot) {
  const auto t0 = Clock::now();
  Membership m(3, 1, kBeat, {true, false, false});
  for (int node = 0; node < 3; ++node) m.joining(node, 1, t0);
  m.formed(t0);
  for (auto t = t0; t <= t0 + 5 * kBeat; t += kBeat / 4) {
    m.heard(0, t);
    m.tick(t);
  }
  EXPECT_TRUE(m.all_up()) << m.problems();
}

}  // namespace
}  // namespace symmesh
