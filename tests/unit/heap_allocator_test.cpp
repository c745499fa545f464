#include "runtime/heap_allocator.h"

#include <gtest/gtest.h>

namespace symmesh {
namespace {

TEST(HeapAllocator, SameCallsGiveSameOffsets) {
  HeapAllocator a(4096, 1 << 20), b(4096, 1 << 20);
  for (size_t size : {100, 7, 4096, 33, 1000}) EXPECT_EQ(a.allocate(size), b.allocate(size));
}

TEST(HeapAllocator, AlignsAndDoesNotOverlap) {
  HeapAllocator heap(8, 1 << 20);
  uint64_t first = heap.allocate(10, 64);
  uint64_t second = heap.allocate(10, 256);
  EXPECT_EQ(first % 64, 0u);
  EXPECT_EQ(second % 256, 0u);
  EXPECT_GE(second, first + 10);
}

TEST(HeapAllocator, FreeCoalescesSoTheWholeRangeIsUsableAgain) {
  HeapAllocator heap(0, 1 << 16);
  std::vector<uint64_t> blocks;
  for (int i = 0; i < 16; ++i) blocks.push_back(heap.allocate(4096, 8));
  EXPECT_THROW(heap.allocate(1, 8), HeapExhausted);
  for (size_t i = 0; i < blocks.size(); i += 2) heap.release(blocks[i]);
  for (size_t i = 1; i < blocks.size(); i += 2) heap.release(blocks[i]);
  EXPECT_EQ(heap.used(), 0u);
  EXPECT_EQ(heap.largest_free_block(), size_t{1} << 16);
  EXPECT_EQ(heap.allocate((1 << 16) - 8, 8), 0u);
}

TEST(HeapAllocator, PeakIsTheMostInUseAtOnceUntilTheNextReset) {
  HeapAllocator heap(0, 1 << 16);
  const uint64_t a = heap.allocate(4096, 8);
  const uint64_t b = heap.allocate(8192, 8);
  heap.release(a);
  heap.allocate(1024, 8);
  EXPECT_EQ(heap.peak(), 4096u + 8192u);
  heap.release(b);
  EXPECT_EQ(heap.peak(), 4096u + 8192u);  // freeing keeps the job's peak
  heap.reset();
  EXPECT_EQ(heap.peak(), 0u);
}

TEST(HeapAllocator, ExhaustionNamesSizeAskedAndSizeFree) {
  HeapAllocator heap(0, 1 << 20);
  heap.allocate(512 << 10);
  try {
    heap.allocate(1 << 20);
    FAIL() << "expected HeapExhausted";
  } catch (const HeapExhausted& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("asked 1.0 MiB"), std::string::npos) << message;
    EXPECT_NE(message.find("512.0 KiB free"), std::string::npos) << message;
    EXPECT_NE(message.find("--heap-size"), std::string::npos) << message;
  }
}

// A size whose end wraps past 2^64 (an attached process names any size) does not fit: the heap
// stays as it was.
TEST(HeapAllocator, ASizeThatWrapsPastTheAddressSpaceIsRefusedAndTheHeapIsUnchanged) {
  HeapAllocator heap(4096, 8192);
  for (const uint64_t bytes : {~uint64_t{0} - 4095, ~uint64_t{0} - 4000, ~uint64_t{0}}) {
    EXPECT_THROW(heap.allocate(bytes, 64), HeapExhausted) << bytes;
  }
  EXPECT_EQ(heap.used(), 0u);
  EXPECT_EQ(heap.allocate(4096, 64), 4096u);
  EXPECT_THROW(heap.allocate(1, 8), HeapExhausted);
}

TEST(HeapAllocator, RejectsFreeOfUnknownOffsetAndBadAlignment) {
  HeapAllocator heap(0, 1 << 20);
  const uint64_t offset = heap.allocate(64);
  heap.release(offset);
  EXPECT_THROW(heap.release(offset), InvalidArgument);
  EXPECT_THROW(heap.allocate(64, 3), InvalidArgument);
}

}  // namespace
}  // namespace symmesh
