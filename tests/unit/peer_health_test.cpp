#include "transport/peer_health.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/errors.h"

namespace symmesh {
namespace {

TEST(PeerHealth, APeerIsUpUntilMarkedDownAndThenNamesWhy) {
  PeerHealth health(3);
  EXPECT_TRUE(health.up(1));
  EXPECT_EQ(health.reason(1), "");
  EXPECT_NO_THROW(health.check(1, [] { return std::string("node 1"); }));
  EXPECT_TRUE(health.mark_down(1, "closed by the peer"));
  EXPECT_FALSE(health.up(1));
  EXPECT_TRUE(health.up(2));
  try {
    health.check(1, [] { return std::string("node 1 (127.0.0.1:7000)"); });
    FAIL() << "a down peer passed the check";
  } catch (const PeerError& e) {
    EXPECT_EQ(std::string(e.what()), "node 1 (127.0.0.1:7000) is down: closed by the peer");
  }
}

TEST(PeerHealth, OnlyTheFirstReportTakesAPeerDown) {
  PeerHealth health(2);
  EXPECT_TRUE(health.mark_down(0, "first"));
  EXPECT_FALSE(health.mark_down(0, "second"));
  EXPECT_EQ(health.reason(0), "first");
}

TEST(PeerHealth, TheCauseReplacesAConsequenceSeenFirst) {
  PeerHealth health(2);
  EXPECT_TRUE(health.mark_down(1, "flushed", /*cause=*/false));
  EXPECT_FALSE(health.mark_down(1, "remote access error", /*cause=*/true));
  EXPECT_EQ(health.reason(1), "remote access error");
  EXPECT_FALSE(health.mark_down(1, "another failure", /*cause=*/true));
  EXPECT_EQ(health.reason(1), "remote access error");
}

TEST(PeerHealth, AnnounceCallsTheCallbackWithTheNodeAndReason) {
  PeerHealth health(2);
  health.announce(1, "before any callback");  // nothing registered: no effect
  std::vector<std::string> heard;
  health.on_down([&](int node, const std::string& why) {
    heard.push_back(std::to_string(node) + ": " + why);
  });
  ASSERT_TRUE(health.mark_down(1, "lost"));
  health.announce(1, "lost");
  EXPECT_EQ(heard, std::vector<std::string>{"1: lost"});
}

// A peer lost while the transport was being made (a port that went down before the daemon
// listened) is heard of when the callback is set, and only once.
TEST(PeerHealth, APeerLostBeforeTheCallbackIsHeardOfWhenItIsSetAndOnce) {
  PeerHealth health(3);
  ASSERT_TRUE(health.mark_down(2, "port 1 of rxe0 went down"));
  health.announce(2, "port 1 of rxe0 went down");  // no one listens yet
  std::vector<std::string> heard;
  health.on_down([&](int node, const std::string& why) {
    heard.push_back(std::to_string(node) + ": " + why);
  });
  EXPECT_EQ(heard, std::vector<std::string>{"2: port 1 of rxe0 went down"});
  health.announce(2, "port 1 of rxe0 went down");
  ASSERT_TRUE(health.mark_down(0, "lost"));
  health.announce(0, "lost");
  EXPECT_EQ(heard, (std::vector<std::string>{"2: port 1 of rxe0 went down", "0: lost"}));
}

}  // namespace
}  // namespace symmesh
