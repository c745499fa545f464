// The wait primitives of transport/wait.h: a timeout given instead of a deadline is fixed when
// the wait first parks, and still ends the wait with a timeout error naming it; a deadline
// already passed ends it at the first park; a ready condition ends it without a deadline.
#include "transport/wait.h"

#include <gtest/gtest.h>

#include <thread>

namespace symmesh {
namespace {

TEST(WaitDeadline, ATimeoutIsFixedWhenFirstNeededAndThenKept) {
  WaitDeadline deadline(std::chrono::milliseconds(500));
  const auto before = Clock::now();
  const Deadline fixed = deadline.get();
  EXPECT_GE(fixed, before + std::chrono::milliseconds(500));
  EXPECT_LE(fixed, Clock::now() + std::chrono::milliseconds(500));
  EXPECT_EQ(deadline.get(), fixed) << "a second read moves nothing";
  const Deadline at = Clock::now() + std::chrono::seconds(3);
  EXPECT_EQ(WaitDeadline(at).get(), at);
}

TEST(WaitUntil, ATimeoutEndsTheWaitNamingIt) {
  Doorbell bell;
  WaitPolicy policy;
  policy.yield_for = std::chrono::microseconds(100);
  const auto start = Clock::now();
  try {
    wait_until(
        bell, std::chrono::milliseconds(50), [] { return false; },
        [] { return std::string("the test's word"); }, policy);
    FAIL() << "the wait never timed out";
  } catch (const TimeoutError& e) {
    EXPECT_STREQ(e.what(), "the test's word: deadline passed");
  }
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(50));
}

TEST(WaitUntil, APassedDeadlineEndsTheWaitAndAReadyOneNeedsNone) {
  Doorbell bell;
  EXPECT_THROW(wait_until(
                   bell, Clock::now() - std::chrono::seconds(1), [] { return false; },
                   [] { return std::string("late"); }),
               TimeoutError);
  // Ready at the 70th check: after the 64 spins, among the first 8 yields, which come before
  // any clock read, so the deadline (passed) is never looked at.
  int checks = 0;
  wait_until(
      bell, Clock::now() - std::chrono::seconds(1), [&] { return ++checks == 70; },
      [] { return std::string("never"); });
  EXPECT_EQ(checks, 70);
}

TEST(YieldUntil, ReturnsTrueOnceReadyAndFalseWhenItsTimeIsUp) {
  int checks = 0;
  EXPECT_TRUE(yield_until([&] { return ++checks == 3; }, std::chrono::milliseconds(1)));
  EXPECT_EQ(checks, 3);
  const auto start = Clock::now();
  EXPECT_FALSE(yield_until([] { return false; }, std::chrono::microseconds(200)));
  EXPECT_GE(Clock::now() - start, std::chrono::microseconds(200));
  EXPECT_FALSE(yield_until([] { return true; }, std::chrono::microseconds(0)))
      << "no time to yield: nothing is checked";
}

// An operation's first wait reads no clock; its second fixes the deadline if the first did not;
// a doorbell given to it ends it at an abort, and one not given does not.
TEST(OperationDeadline, FixedByALaterWaitAndEndedByAnAbort) {
  Doorbell bell;
  OperationDeadline deadline(std::chrono::milliseconds(0), bell);
  EXPECT_FALSE(deadline.passed_at_wait()) << "the first wait reads no clock";
  EXPECT_TRUE(deadline.passed_at_wait()) << "a 0 ms timeout has passed by the second";
  EXPECT_EQ(deadline.abort_reason(), "");
  bell.abort("PE 2 failed");
  EXPECT_EQ(deadline.abort_reason(), "PE 2 failed");
  OperationDeadline flush(deadline_after(std::chrono::hours(1)));
  EXPECT_EQ(flush.abort_reason(), "") << "no doorbell given: an abort does not end it";
  EXPECT_FALSE(flush.passed_at_wait());
  EXPECT_FALSE(flush.passed_at_wait()) << "an hour has not passed";
}

}  // namespace
}  // namespace symmesh
