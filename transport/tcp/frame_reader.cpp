#include "transport/tcp/frame_reader.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace symmesh {

FrameReader::FrameReader() : inbox_(kInboxBytes) {
  expect(Part::kPrefix, prefix_.data(), prefix_.size());
}

void FrameReader::expect(Part part, std::byte* at, size_t bytes) {
  part_ = part;
  part_at_ = at;
  part_bytes_ = bytes;
  part_done_ = 0;
}

bool FrameReader::fail(Result& result, std::string why) {
  failed_ = true;
  result.stopped = Stopped::kFailed;
  result.failure = std::move(why);
  return false;
}

bool FrameReader::part_complete(Sink& sink, Result& result) {
  switch (part_) {
    case Part::kPrefix: {
      const uint32_t length = read_length_prefix(reinterpret_cast<const char*>(prefix_.data()));
      if (length == 0 || length > kMaxDataHeader) {
        return fail(result, "data header of " + std::to_string(length) +
                                " bytes is outside the allowed 1.." +
                                std::to_string(kMaxDataHeader));
      }
      expect(Part::kHeader, header_bytes_.data(), length);
      return true;
    }
    case Part::kHeader: {
      if (!header_.ParseFromArray(header_bytes_.data(), static_cast<int>(part_bytes_))) {
        return fail(result, "malformed DataHeader (" + std::to_string(part_bytes_) + " bytes)");
      }
      std::string error;
      std::byte* target = sink.payload_target(header_, error);
      if (!error.empty()) return fail(result, error);
      const bool has_payload = header_.kind() == wire::PUT || header_.kind() == wire::GET_REPLY;
      if (has_payload && header_.length() > 0) {
        expect(target ? Part::kPayload : Part::kDropped, target, header_.length());
        return true;
      }
      break;
    }
    case Part::kPayload:
    case Part::kDropped:
      break;
  }
  sink.frame_complete(header_);
  ++result.frames;
  expect(Part::kPrefix, prefix_.data(), prefix_.size());
  return true;
}

bool FrameReader::take_from_inbox(Sink& sink, Result& result) {
  while (inbox_begin_ < inbox_end_) {
    const size_t bytes = std::min(inbox_end_ - inbox_begin_, part_bytes_ - part_done_);
    if (part_at_) std::memcpy(part_at_ + part_done_, inbox_.data() + inbox_begin_, bytes);
    inbox_begin_ += bytes;
    part_done_ += bytes;
    if (part_done_ == part_bytes_ && !part_complete(sink, result)) return false;
  }
  return true;
}

FrameReader::Result FrameReader::read(int fd, size_t budget, Sink& sink, bool small_frames_only) {
  Result result;
  if (failed_) {
    fail(result, "the connection's stream broke earlier");
    return result;
  }
  size_t received = 0;
  for (;;) {
    if (!take_from_inbox(sink, result)) return result;
    if (received >= budget) {
      result.stopped = Stopped::kBudgetSpent;
      return result;
    }
    const size_t missing = part_bytes_ - part_done_;
    const bool direct = part_ == Part::kPayload && missing >= kDirectPayloadBytes;
    if (direct && small_frames_only) {
      result.stopped = Stopped::kBudgetSpent;
      return result;
    }
    std::byte* into = direct ? part_at_ + part_done_ : inbox_.data();
    const size_t room = direct ? missing : inbox_.size();
    const ssize_t got = ::recv(fd, into, room, MSG_DONTWAIT);
    if (got <= 0) {
      const int error = errno;
      if (got < 0 && error == EINTR) continue;
      if (got < 0 && (error == EAGAIN || error == EWOULDBLOCK)) return result;
      fail(result,
           got == 0 ? "closed by the peer" : std::string("read failed: ") + std::strerror(error));
      return result;
    }
    received += static_cast<size_t>(got);
    if (direct) {
      part_done_ += static_cast<size_t>(got);
      if (part_done_ == part_bytes_ && !part_complete(sink, result)) return result;
    } else {
      inbox_begin_ = 0;
      inbox_end_ = static_cast<size_t>(got);
    }
  }
}

}  // namespace symmesh
