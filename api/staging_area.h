// One side's mapping of a PE's staging area (api/request_ring.h): the bytes after the request
// ring in the ring's memfd. The daemon grows it (the memfd, then its own mapping); the process
// maps the new part at the size the completion reports. Both keep the descriptor for that.
//
// The mapping never moves: the whole most the area may grow to is reserved (address space
// only) when the area is first mapped, and growing maps the new tail in place. So a pointer
// into the area stays good as it grows: the daemon reads a call's staged inputs while it grows
// the area for the outputs, and the process lends its callers tensors in it (api/staging_loans.h).
#pragma once

#include <atomic>
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

  uint64_t bytes() const { return bytes_.load(std::memory_order_acquire); }
  // Maps the area up to `bytes` (a whole number of pages), which the memfd already holds. The
  // area never shrinks: a smaller size keeps the mapping as it is.
  void map(uint64_t bytes);
  // Daemon: makes the area at least `bytes` long (in powers of two from 1 MiB), or throws
  // InvalidArgument naming `what` past kMaxStagingBytes.
  void grow(uint64_t bytes, const char* what);
  // [offset, offset + bytes) of the area; InvalidArgument naming `what` when it is not inside.
  std::byte* range(uint64_t offset, uint64_t bytes, const char* what) const;

 private:
  int fd_;
  // One thread maps (the process's call, the daemon's PE thread) while another may take ranges
  // (the process's staged calls): both only grow, published by bytes_.
  std::atomic<std::byte*> data_ = nullptr;  // the reservation's start, kMaxStagingBytes long
  std::atomic<uint64_t> bytes_ = 0;         // mapped from the memfd
};

}  // namespace symmesh::attach
