// The library's mirror of a session's low-latency buffer in the daemon (two halves, taken in
// turn by successive dispatches, each freed by its combine or by dropping its handle), so a
// dispatch or combine the daemon would have to refuse, which ends the session, is refused in the
// process first. Each step takes the lock once, so two threads cannot both pass a check.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace symmesh {

class LowLatencyHalves {
 public:
  using Shape = std::array<int64_t, 5>;  // hidden, topk, experts, max_tokens, element type

  // Takes the half the next dispatch of `shape` uses, as the daemon will: a new shape starts a
  // new buffer (allowed with no dispatch in flight). Throws InvalidArgument naming the
  // dispatch that holds the half, or the change of shape.
  int reserve(const Shape& shape);
  // The reserved half is now held by dispatch `id`.
  void hold(int half, uint64_t id);
  // The dispatch that reserved `half` failed (the session is over): the half is not held.
  void cancel(int half);
  // Frees the half dispatch `id` holds; false when it holds none (combined or dropped already).
  bool free(uint64_t id);

 private:
  static constexpr uint64_t kReserved = ~uint64_t{0};  // a dispatch under way

  std::mutex mutex_;
  Shape shape_{};
  uint64_t dispatches_ = 0;           // into the current buffer: the daemon's sequence
  std::array<uint64_t, 2> holder_{};  // 0: free
};

}  // namespace symmesh
