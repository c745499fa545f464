// Copies whose destination the cache should not keep: non-temporal stores write around the
// cache, so a copy larger than the cache neither reads each destination line first (as an
// ordinary store does) nor evicts what other threads are about to read. glibc's memcpy makes the
// same choice for one copy above its non-temporal threshold; these helpers make it for many
// small copies that add up to that much (the rows a MoE dispatch delivers).
#pragma once

#include <cstddef>
#include <string>

namespace symmesh {

// 3/4 of a CPU's share of the last-level cache (its size over the CPUs sharing it, as the
// kernel reports them), as glibc's threshold up to 2.37; 4 MiB where the kernel does not say.
size_t streaming_threshold();
// The highest cache level's size over the CPUs sharing it, read from a sysfs cache directory
// (index*/level, size in K, shared_cpu_list), as lscpu reads it: the CPUID some virtual machines
// pass through claims the host's whole cache. 0 when the directory does not say.
size_t last_level_cache_share(const std::string& cache_dir = "/sys/devices/system/cpu/cpu0/cache");
// memcpy with non-temporal stores for the 16-byte aligned part of dst (ordinary ones for an
// unaligned head and the tail). Call streaming_fence() after the last one, before the data is
// handed on. Under AddressSanitizer or ThreadSanitizer, which do not see these stores, it is
// memcpy.
void streaming_copy(void* dst, const void* src, size_t bytes);
void streaming_fence();
// One copy, as glibc's memcpy makes it past its non-temporal threshold but with this machine's
// threshold: streamed and fenced when `bytes` reaches it, else memcpy.
void bulk_copy(void* dst, const void* src, size_t bytes);
// One of many copies that together write `total` bytes: streamed when the total reaches the
// threshold, else memcpy.
class CopyInto {
 public:
  explicit CopyInto(size_t total) : streaming_(total >= streaming_threshold()) {}
  void operator()(void* dst, const void* src, size_t bytes) const;
  bool streaming() const { return streaming_; }

 private:
  bool streaming_;
};

// The copies of one scope, as CopyInto; when they streamed, the scope's end (a return or a
// throw) fences them, so no one reads them before they are in memory.
class ScopedCopyInto : public CopyInto {
 public:
  explicit ScopedCopyInto(size_t total) : CopyInto(total) {}
  ~ScopedCopyInto() {
    if (streaming()) streaming_fence();
  }
  ScopedCopyInto(const ScopedCopyInto&) = delete;
  ScopedCopyInto& operator=(const ScopedCopyInto&) = delete;
};

// Fences this thread's streaming stores when it leaves a scope, by return or by a throw.
class StreamingFenceOnExit {
 public:
  StreamingFenceOnExit() = default;
  ~StreamingFenceOnExit() { streaming_fence(); }
  StreamingFenceOnExit(const StreamingFenceOnExit&) = delete;
  StreamingFenceOnExit& operator=(const StreamingFenceOnExit&) = delete;
};

}  // namespace symmesh
