// The non-temporal copy writes exactly what memcpy writes, at every alignment of its
// destination within a cache line, four of its source, and sizes around the 16-byte stores and
// the 64-byte lines, and nothing around it.
#include "common/streaming_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace symmesh {
namespace {

TEST(StreamingCopy, WritesWhatMemcpyWritesAndNothingElse) {
  constexpr size_t kGuard = 32;
  for (size_t dst_offset = 0; dst_offset < 65; ++dst_offset) {
    for (size_t src_offset = 0; src_offset < 4; ++src_offset) {
      for (size_t bytes : {0, 1, 15, 16, 17, 31, 33, 63, 64, 65, 100, 129, 14336 + 5}) {
        std::vector<uint8_t> src(bytes + src_offset + 1),
            dst(bytes + dst_offset + 2 * kGuard, 0xee);
        for (size_t i = 0; i < src.size(); ++i) src[i] = uint8_t(i * 7 + 1);
        streaming_copy(dst.data() + kGuard + dst_offset, src.data() + src_offset, bytes);
        streaming_fence();
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= kGuard + dst_offset && i < kGuard + dst_offset + bytes;
          const uint8_t want = inside ? src[src_offset + i - kGuard - dst_offset] : 0xee;
          ASSERT_EQ(dst[i], want) << "dst offset " << dst_offset << ", src offset " << src_offset
                                  << ", " << bytes << " bytes, at " << i;
        }
      }
    }
  }
}

TEST(StreamingCopy, TheThresholdIsSet) {
  EXPECT_GT(streaming_threshold(), 0u);
}

}  // namespace
}  // namespace symmesh
