#include "transport/verbs/buffer.h"

namespace symmesh {

MemoryRegion register_segment(const VerbsDevice& device, const SegmentView& segment) {
  return device.register_memory(segment.base, segment.size,
                                IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
}

BounceBuffer::BounceBuffer(const VerbsDevice& device, size_t bytes)
    : ring(bytes),
      bytes_(std::make_unique<std::byte[]>(bytes)),
      region_(device.register_memory(bytes_.get(), bytes, IBV_ACCESS_LOCAL_WRITE)) {}

}  // namespace symmesh
