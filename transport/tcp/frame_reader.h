// Reads data frames off a non-blocking tcp socket: a u32 length, a DataHeader of at most
// kMaxDataHeader bytes, then the payload, straight into the place the sink names for it.
// Small frames arrive through an inbox (one recv takes a header and its payload, or several
// frames); a payload of at least kDirectPayloadBytes still missing is received straight into
// its target, so a large put is copied once, by the kernel. The inbox is small because what
// a recv puts there that belongs to a large payload is copied twice: with a 64 KiB inbox,
// a 16 MiB all-reduce over tcp was 12-20% slower.
// It holds the state of a frame half read, so whichever thread reads next goes on from there;
// it does not lock: its owner lets one thread read at a time.
// Nothing is allocated from a length the peer sent: the header length is checked against its
// cap first, and a payload nobody wants any more (a reply whose waiter gave up) is dropped as
// it passes through the inbox.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "transport/frame.h"
#include "wire/data.pb.h"

namespace symmesh {

class FrameReader {
 public:
  // What the reader asks of its owner, on the reading thread.
  class Sink {
   public:
    virtual ~Sink() = default;
    // Where the payload of `header` goes: nullptr drops it, a non-empty `error` refuses it.
    virtual std::byte* payload_target(const wire::DataHeader& header, std::string& error) = 0;
    // The frame (and its payload) has arrived.
    virtual void frame_complete(const wire::DataHeader& header) = 0;
  };

  enum class Stopped { kDrained, kBudgetSpent, kFailed };
  struct Result {
    Stopped stopped = Stopped::kDrained;
    int frames = 0;       // completed in this call
    std::string failure;  // when kFailed: what was wrong (the peer closed, a bad header)
  };

  static constexpr size_t kInboxBytes = 4 << 10;
  static constexpr size_t kDirectPayloadBytes = 4 << 10;

  FrameReader();

  // Receives from `fd` until the socket has nothing more (kDrained), about `budget` bytes were
  // received or, with `small_frames_only`, a payload is large enough to be received straight
  // into its target (kBudgetSpent: the rest is for a later read), or the stream is broken
  // (kFailed: the reader stays failed).
  Result read(int fd, size_t budget, Sink& sink, bool small_frames_only = false);
  bool failed() const { return failed_; }

 private:
  enum class Part { kPrefix, kHeader, kPayload, kDropped };
  // Moves inbox bytes into the current part; false on a failure.
  bool take_from_inbox(Sink& sink, Result& result);
  // The current part is whole: go on to the next; false on a failure.
  bool part_complete(Sink& sink, Result& result);
  void expect(Part part, std::byte* at, size_t bytes);
  bool fail(Result& result, std::string why);

  Part part_ = Part::kPrefix;
  std::byte* part_at_ = nullptr;  // where the current part's bytes go (nullptr: dropped)
  size_t part_bytes_ = 0;
  size_t part_done_ = 0;
  bool failed_ = false;

  std::array<std::byte, kLengthPrefixBytes> prefix_{};
  std::array<std::byte, kMaxDataHeader> header_bytes_{};
  wire::DataHeader header_;

  std::vector<std::byte> inbox_;
  size_t inbox_begin_ = 0;
  size_t inbox_end_ = 0;
};

}  // namespace symmesh
