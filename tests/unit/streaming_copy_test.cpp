// The non-temporal copy writes exactly what memcpy writes, at every alignment of its
// destination within a cache line, four of its source, and sizes around the 16-byte stores and
// the 64-byte lines, and nothing around it.
#include "common/streaming_copy.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
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

// One copy on either side of the threshold (memcpy below it, streamed and fenced from it), and
// none at all for 0 bytes, whose pointers may be null.
TEST(StreamingCopy, ABulkCopyWritesWhatMemcpyWritesOnEitherSideOfTheThreshold) {
  bulk_copy(nullptr, nullptr, 0);
  for (size_t bytes : {streaming_threshold() - 1, streaming_threshold() + 5}) {
    std::vector<uint8_t> src(bytes), dst(bytes + 1, 0xee);
    for (size_t i = 0; i < bytes; ++i) src[i] = uint8_t(i * 13 + 5);
    bulk_copy(dst.data() + 1, src.data(), bytes);  // an unaligned head
    EXPECT_EQ(dst[0], 0xee) << bytes << " bytes";
    EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 1)) << bytes << " bytes";
  }
}

// The share is read as lscpu reads it: the highest level whose size (in K) and CPU list
// parse, over the count of CPUs in that list.
TEST(StreamingCopy, TheCacheShareIsTheHighestLevelOverItsCpus) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("symmesh-cache-" + std::to_string(::getpid()));
  auto cache = [&](int index, const std::string& level, const std::string& size,
                   const std::string& cpus) {
    const auto at = dir / ("index" + std::to_string(index));
    std::filesystem::create_directories(at);
    std::ofstream(at / "level") << level << "\n";
    std::ofstream(at / "size") << size << "\n";
    std::ofstream(at / "shared_cpu_list") << cpus << "\n";
  };
  std::filesystem::remove_all(dir);
  EXPECT_EQ(last_level_cache_share(dir.string()), 0u) << "no directory: the caller's default";
  cache(0, "1", "32K", "0");
  cache(1, "2", "1024K", "0");
  cache(2, "3", "28672K", "0-3,8,10-11");
  EXPECT_EQ(last_level_cache_share(dir.string()), size_t{28672} * 1024 / 7);
  cache(3, "4", "1M", "0-15");  // not in K: not read, the level below stands
  EXPECT_EQ(last_level_cache_share(dir.string()), size_t{28672} * 1024 / 7);
  cache(3, "4", "65536K", "");  // no CPUs: not read
  EXPECT_EQ(last_level_cache_share(dir.string()), size_t{28672} * 1024 / 7);
  std::filesystem::remove_all(dir);
  EXPECT_GT(streaming_threshold(), 0u);
}

}  // namespace
}  // namespace symmesh
