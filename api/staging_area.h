// One side's mapping of a PE's staging area (api/request_ring.h): the bytes after the request
// ring in the ring's memfd. The daemon grows it (the memfd, then its own mapping); the process
// maps it again at the size the completion reports. Both keep the descriptor for that.
#pragma once

#include <cstddef>
#include <cstdint>

namespace symmesh::attach {

// The most a staging area may grow to: a call that needs more is refused, naming it.
inline constexpr uint64_t kMaxStagingBytes = uint64_t{16} << 30;

class StagingArea {
 public:
  explicit StagingArea(int ring_fd);  // takes the descriptor; maps nothing yet
  ~StagingArea();
  StagingArea(const StagingArea&) = delete;
  StagingArea& operator=(const StagingArea&) = delete;

  uint64_t bytes() const { return bytes_; }
  // Maps the area at `bytes`, which the memfd already holds, in place of the current mapping.
  void map(uint64_t bytes);
  // Daemon: makes the area at least `bytes` long (in powers of two from 1 MiB), or throws
  // InvalidArgument naming `what` past kMaxStagingBytes.
  void grow(uint64_t bytes, const char* what);
  // [offset, offset + bytes) of the area; InvalidArgument naming `what` when it is not inside.
  std::byte* range(uint64_t offset, uint64_t bytes, const char* what) const;

 private:
  int fd_;
  std::byte* data_ = nullptr;
  uint64_t bytes_ = 0;
};

}  // namespace symmesh::attach
