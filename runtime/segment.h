// The node's symmetric heap memory: one shared-memory segment (memfd), mapped once. The
// ranks of a node are threads of the daemon, so they all see it at the same address; the fd
// is there for RDMA registration and for processes that want to map it too.
#pragma once

#include <cstddef>
#include <string>

#include "transport/transport.h"

namespace symmesh {

class SharedSegment {
 public:
  SharedSegment(size_t bytes, const std::string& name);
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;

  std::byte* base() const { return base_; }
  size_t size() const { return size_; }
  int fd() const { return fd_; }
  SegmentView view() const { return SegmentView{base_, size_}; }

 private:
  std::byte* base_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;
};

}  // namespace symmesh
