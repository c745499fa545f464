#include "common/streaming_copy.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace symmesh {

namespace {

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "0-3,8,10-11" -> 7.
size_t count_cpus(const std::string& list) {
  size_t count = 0;
  std::istringstream ranges(list);
  for (std::string range; std::getline(ranges, range, ',');) {
    unsigned first = 0, last = 0;
    if (std::sscanf(range.c_str(), "%u-%u", &first, &last) == 2 && last >= first) {
      count += last - first + 1;
    } else if (!range.empty()) {
      ++count;
    }
  }
  return count;
}

}  // namespace

size_t last_level_cache_share(const std::string& cache_dir) {
  int best_level = 0;
  size_t share = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = cache_dir + "/index" + std::to_string(index);
    const int level = std::atoi(read_line(dir + "/level").c_str());
    unsigned long kib = 0;
    const size_t cpus = count_cpus(read_line(dir + "/shared_cpu_list"));
    char unit = 0;
    if (level <= best_level || cpus == 0 ||
        std::sscanf(read_line(dir + "/size").c_str(), "%lu%c", &kib, &unit) != 2 || unit != 'K') {
      continue;
    }
    best_level = level;
    share = (size_t(kib) << 10) / cpus;
  }
  return share;
}

size_t streaming_threshold() {
  static const size_t threshold = [] {
    const size_t share = last_level_cache_share();
    return share > 0 ? share * 3 / 4 : size_t{4} << 20;
  }();
  return threshold;
}

void streaming_copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  std::memcpy(dst, src, bytes);
#else
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
  const size_t head = std::min(bytes, (16 - reinterpret_cast<uintptr_t>(out) % 16) % 16);
  std::memcpy(out, in, head);
  size_t done = head;
  for (; done + 16 <= bytes; done += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + done),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done)));
  }
  std::memcpy(out + done, in + done, bytes - done);
#endif
}

void streaming_fence() {
  _mm_sfence();
}

void bulk_copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const ScopedCopyInto copy(bytes);
  copy(dst, src, bytes);
}

void CopyInto::operator()(void* dst, const void* src, size_t bytes) const {
  if (streaming_) {
    streaming_copy(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
}

}  // namespace symmesh
