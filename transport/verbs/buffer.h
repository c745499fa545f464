// The verbs buffers: memory the device reads and writes. The node's segment is registered
// once for local write, remote write, read and atomics, so peers write it with no CPU here.
// Each PE has a bounce buffer registered for local write: puts copy their data into it (the
// caller's memory may be reused at once and need not be registered), gets and fetch-adds
// land their results in it; it is handed out as a ring (bounce_ring.h).
#pragma once

#include <cstddef>
#include <memory>

#include "transport/transport.h"
#include "transport/verbs/bounce_ring.h"
#include "transport/verbs/device.h"

namespace symmesh {

MemoryRegion register_segment(const VerbsDevice& device, const SegmentView& segment);

class BounceBuffer {
 public:
  BounceBuffer(const VerbsDevice& device, size_t bytes);

  std::byte* at(uint64_t position) const { return bytes_.get() + ring.offset(position); }
  uint32_t lkey() const { return region_->lkey; }

  BounceRing ring;

 private:
  std::unique_ptr<std::byte[]> bytes_;
  MemoryRegion region_;
};

}  // namespace symmesh
