// The verbs transport's staging ring: space comes back only in order, a range never
// straddles the end, and a full ring says no instead of overwriting.
#include "transport/verbs/bounce_ring.h"

#include <gtest/gtest.h>

namespace symmesh {
namespace {

TEST(BounceRing, AllocatesInOrderAndRefusesWhenFull) {
  BounceRing ring(1024);
  auto a = ring.allocate(500);  // rounded to 504
  auto b = ring.allocate(500);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(ring.offset(*a), 0u);
  EXPECT_EQ(ring.offset(*b), 504u);
  EXPECT_FALSE(ring.allocate(100)) << "only 16 bytes are left";
  EXPECT_TRUE(ring.allocate(16));
  EXPECT_EQ(ring.in_use(), 1024u);
}

TEST(BounceRing, ARangeNeverStraddlesTheEnd) {
  BounceRing ring(1024);
  auto a = ring.allocate(600);
  ring.release_to(ring.tail());  // a completed
  ASSERT_TRUE(a);
  auto b = ring.allocate(600);  // does not fit in the 424 bytes before the end: wraps
  ASSERT_TRUE(b);
  EXPECT_EQ(ring.offset(*b), 0u);
  EXPECT_FALSE(ring.allocate(500)) << "424 bytes of the gap are skipped, not reused";
}

TEST(BounceRing, ReleaseIsMonotoneAndTooLargeIsRefused) {
  BounceRing ring(4096);
  EXPECT_FALSE(ring.allocate(4097));
  auto a = ring.allocate(1000);
  const uint64_t after_a = ring.tail();
  auto b = ring.allocate(1000);
  ASSERT_TRUE(a && b);
  ring.release_to(ring.tail());
  ring.release_to(after_a);  // an older position changes nothing
  EXPECT_EQ(ring.in_use(), 0u);
}

TEST(BounceRing, SpaceNeverPostedIsTakenBack) {
  BounceRing ring(4096);
  ASSERT_TRUE(ring.allocate(1000));
  const uint64_t posted_end = ring.tail();
  ASSERT_TRUE(ring.allocate(2000));  // staged for a request that was never posted
  ring.take_back_from(posted_end);
  EXPECT_EQ(ring.in_use(), 1000u);
  auto again = ring.allocate(3000);
  ASSERT_TRUE(again) << "the 2000 bytes taken back are free again";
  EXPECT_EQ(ring.offset(*again), 1000u);
  ring.release_to(ring.tail());
  ASSERT_TRUE(ring.allocate(8));
  ring.take_back_from(0);  // nothing posted at all: never below what was released
  EXPECT_EQ(ring.in_use(), 0u);
  EXPECT_EQ(ring.tail(), 4000u);
}

}  // namespace
}  // namespace symmesh
