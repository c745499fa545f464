// Who waited for whom: a PE's waits per peer, the job's fold of them into a straggler, and the
// drill that makes a PE slow for the tests that show it.
#include "runtime/peer_waits.h"

#include <gtest/gtest.h>

#include "common/errors.h"
#include "daemon/jobs/job.h"
#include "jobs/drill.h"

namespace symmesh {
namespace {

using std::chrono::milliseconds;

TEST(PeerWaits, AWaitCountsForItsPeerAndEveryWaitForTheTotal) {
  PeerWaits waits(3);
  waits.add(2, milliseconds(30));
  waits.add(2, milliseconds(10));
  waits.add(-1, milliseconds(5));  // a word several peers write: the total only
  waits.add(7, milliseconds(5));   // no such peer: the total only
  EXPECT_EQ(waits.seconds(), (std::vector<double>{0.0, 0.0, 0.04}));
  EXPECT_DOUBLE_EQ(waits.blocked_seconds(), 0.05);
}

TEST(JobWaits, TheStragglerIsThePeThatWaitedLeastWhileTheOthersWaited) {
  wire::JobResult result;
  summarize_waits({0.1, 0.1, 0.0, 0.8}, {0.40, 0.01, 0.38, 0.42}, result);
  ASSERT_TRUE(result.has_straggler());
  EXPECT_EQ(result.straggler(), 1u);
  EXPECT_NEAR(result.straggler_share(), 1.0 - 0.01 / 0.40, 1e-12);
  EXPECT_EQ(result.wait_by_peer_s_size(), 4);
  EXPECT_EQ(result.blocked_s_size(), 4);
}

TEST(JobWaits, NoStragglerWithOnePeOrNoWaiting) {
  wire::JobResult one, none;
  summarize_waits({0.0}, {0.5}, one);
  summarize_waits({0, 0}, {0, 0}, none);
  EXPECT_FALSE(one.has_straggler());
  EXPECT_FALSE(none.has_straggler());
  EXPECT_EQ(none.blocked_s_size(), 2);
}

TEST(SlowPeDrill, ReadsPeAndMillisecondsAndRefusesAnythingElse) {
  EXPECT_EQ(parse_slow_pe_drill("").pe, -1);
  const SlowPeDrill drill = parse_slow_pe_drill("3:40");
  EXPECT_EQ(drill.pe, 3);
  EXPECT_EQ(drill.milliseconds, 40);
  for (const char* bad : {"3", "3:", ":40", "x:40", "3:40ms", "-1:40", "3:-1", "3:600000"}) {
    try {
      parse_slow_pe_drill(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("SYMMESH_DRILL_SLOW_PE"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("PE:MILLISECONDS"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace symmesh
