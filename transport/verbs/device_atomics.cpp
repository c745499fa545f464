#include "transport/verbs/device_atomics.h"

namespace symmesh {
namespace {

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_release(void* address);
#endif

// ThreadSanitizer cannot see the device write the word: what this PE wrote before is
// released on it, as a CPU store-release would (readers acquire the word).
void device_will_write(void* word) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(word);
#else
  (void)word;
#endif
}

}  // namespace

void DeviceAtomicsTransport::put_gather(int src_pe, int node, uint64_t offset,
                                        std::span<const PutPiece> source,
                                        const SignalUpdate* signal) {
  if (!signal || signal->op == SignalOp::kSet)
    return shm_.put_gather(src_pe, node, offset, source, signal);
  // The data by memcpy, then the add through the device: the add is posted after the copy
  // has finished, so a PE that sees the signal sees the data.
  shm_.put_gather(src_pe, node, offset, source, nullptr);
  atomic_fetch_add(src_pe, node, signal->offset, signal->value);
}

uint64_t DeviceAtomicsTransport::atomic_fetch_add(int src_pe, int node, uint64_t offset,
                                                  uint64_t value) {
  device_will_write(segment_.base + offset);
  const uint64_t old = verbs_.atomic_fetch_add(src_pe, node, offset, value);
  doorbell_.ring();
  return old;
}

}  // namespace symmesh
