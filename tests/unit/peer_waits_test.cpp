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

TEST(PeerWaits, EachCallAddsWhatItBlockedToItsOpsHistogramThrowingOrNot) {
  PeerWaits waits(2);
  waits.add(1, milliseconds(7));  // before any call: in no call's figure
  {
    const CountedCall call(waits, "allreduce");
    waits.add(1, milliseconds(20));
    waits.add(-1, milliseconds(30));
  }
  { const CountedCall call(waits, "allreduce"); }  // blocked on nothing
  try {
    const CountedCall call(waits, "combine");
    waits.add(0, milliseconds(2));
    throw TimeoutError("a peer never wrote");
  } catch (const TimeoutError&) {
  }
  const PeerWaits::CallHistograms calls = waits.calls();
  ASSERT_EQ(calls.size(), 2u);
  const Histogram& allreduce = calls.at("allreduce");
  EXPECT_EQ(allreduce.bounds, kCallWaitBounds);
  EXPECT_EQ(allreduce.count, 2u);
  EXPECT_NEAR(allreduce.sum, 0.05, 1e-12);
  ASSERT_EQ(allreduce.counts.size(), kCallWaitBounds.size() + 1);
  EXPECT_EQ(allreduce.counts[0], 1u);  // 0 s: at most 10 us
  EXPECT_EQ(allreduce.counts[4], 1u);  // 50 ms: above 10 ms, at most 100 ms
  EXPECT_EQ(calls.at("combine").count, 1u);
  EXPECT_NEAR(calls.at("combine").sum, 0.002, 1e-12);
}

TEST(Histogram, MergeAddsCountsSumsAndTakesTheBoundsWhenItHasNone) {
  Histogram a, b, empty;
  a.bounds = b.bounds = {1, 2};
  a.observe(0.5);
  b.observe(1.5);
  b.observe(9);
  empty.merge(a);
  empty.merge(b);
  EXPECT_EQ(empty.bounds, (std::vector<double>{1, 2}));
  EXPECT_EQ(empty.counts, (std::vector<uint64_t>{1, 1, 1}));
  EXPECT_DOUBLE_EQ(empty.sum, 11);
  EXPECT_EQ(empty.count, 3u);
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
