// The single-producer / single-consumer ready queue of gemm-allreduce under stress: millions of
// tile ids through a small ring, none lost, none duplicated, none out of order.
#include "ops/fused/ready_queue.h"

#include <gtest/gtest.h>

#include <thread>

namespace symmesh {
namespace {

TEST(ReadyQueue, MillionsOfPairsArriveOnceAndInOrder) {
  constexpr int64_t kItems = 4'000'000;
  ReadyQueue queue(64);
  Doorbell bell;
  const Deadline deadline = deadline_after(std::chrono::seconds(120));
  std::thread producer([&] {
    for (int64_t i = 0; i < kItems; ++i) queue.push(i, bell, deadline);
  });
  int64_t expected = 0, out_of_order = 0;
  while (expected < kItems && Clock::now() < deadline) {
    int64_t tile;
    if (!queue.try_pop(tile)) {
      std::this_thread::yield();
      continue;
    }
    if (tile != expected) ++out_of_order;
    ++expected;
  }
  producer.join();
  EXPECT_EQ(expected, kItems);
  EXPECT_EQ(out_of_order, 0);
  int64_t extra;
  EXPECT_FALSE(queue.try_pop(extra));
}

TEST(ReadyQueue, AFullRingRefusesAndAnEmptyOneHasNothing) {
  ReadyQueue queue(3);  // rounded up to 4
  int64_t tile;
  EXPECT_FALSE(queue.try_pop(tile));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(queue.try_push(i));
  EXPECT_FALSE(queue.try_push(4));
  EXPECT_TRUE(queue.try_pop(tile));
  EXPECT_EQ(tile, 0);
  EXPECT_TRUE(queue.try_push(4));
}

}  // namespace
}  // namespace symmesh
