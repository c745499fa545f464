// Copies whose destination the cache should not keep: non-temporal stores write around the
// cache, so a copy larger than the cache neither reads each destination line first (as an
// ordinary store does) nor evicts what other threads are about to read. glibc's memcpy makes the
// same choice for one copy above its non-temporal threshold; these helpers make it for many
// small copies that add up to that much (the rows a MoE dispatch delivers).
#pragma once

#include <cstddef>

namespace symmesh {

// 3/4 of a CPU's share of the last-level cache (its size over the CPUs sharing it, as the
// kernel reports them), as glibc's threshold up to 2.37; 4 MiB where the kernel does not say.
size_t streaming_threshold();
// memcpy with non-temporal stores for the 16-byte aligned part of dst (ordinary ones for an
// unaligned head and the tail). Call streaming_fence() after the last one, before the data is
// handed on. Under AddressSanitizer or ThreadSanitizer, which do not see these stores, it is
// memcpy.
void streaming_copy(void* dst, const void* src, size_t bytes);
void streaming_fence();

// Fences this thread's streaming stores when it leaves a scope, by return or by a throw.
class StreamingFenceOnExit {
 public:
  StreamingFenceOnExit() = default;
  ~StreamingFenceOnExit() { streaming_fence(); }
  StreamingFenceOnExit(const StreamingFenceOnExit&) = delete;
  StreamingFenceOnExit& operator=(const StreamingFenceOnExit&) = delete;
};

}  // namespace symmesh
