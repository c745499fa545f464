#include "transport/tcp/buffer.h"

#include <atomic>

#include "transport/segment_ops.h"

namespace symmesh {
namespace {

constexpr uint32_t kMaxStripes = 64;

}  // namespace

std::string TcpBuffer::check(const wire::DataHeader& header) const {
  switch (header.kind()) {
    case wire::PUT: {
      std::string problem = check_range(header.offset(), header.length(), segment_.size, false);
      if (problem.empty() && header.has_signal()) {
        problem = check_range(header.signal_offset(), 8, segment_.size, true);
        if (!problem.empty()) problem = "signal " + problem;
      }
      if (problem.empty() && header.stripe_count() > kMaxStripes) {
        problem = "stripe count " + std::to_string(header.stripe_count()) + " above " +
                  std::to_string(kMaxStripes);
      }
      return problem;
    }
    case wire::GET_REQUEST:
      return check_range(header.offset(), header.length(), segment_.size, false);
    case wire::ATOMIC_ADD:
    case wire::FETCH_ADD:
      return check_range(header.offset(), 8, segment_.size, true);
    default:
      return "not a frame into the segment";
  }
}

void TcpBuffer::complete_put(const wire::DataHeader& header) {
  if (!header.has_signal()) {
    std::atomic_thread_fence(std::memory_order_release);
    return;
  }
  if (header.stripe_count() > 1) {
    std::lock_guard lock(stripes_mutex_);
    const auto key = std::make_pair(header.src_pe(), header.signal_id());
    if (++stripes_seen_[key] != header.stripe_count()) return;
    stripes_seen_.erase(key);
  }
  apply_signal(segment_, SignalUpdate{header.signal_offset(), header.signal_value(),
                                      header.signal_kind() == wire::SIGNAL_SET ? SignalOp::kSet
                                                                               : SignalOp::kAdd});
}

void TcpBuffer::atomic_add(const wire::DataHeader& header) {
  segment_word(segment_, header.offset()).fetch_add(header.value(), std::memory_order_acq_rel);
}

uint64_t TcpBuffer::fetch_add(const wire::DataHeader& header) {
  return segment_word(segment_, header.offset())
      .fetch_add(header.value(), std::memory_order_acq_rel);
}

OutFrame TcpBuffer::get_reply(const wire::DataHeader& request) const {
  wire::DataHeader answer;
  answer.set_kind(wire::GET_REPLY);
  answer.set_token(request.token());
  answer.set_length(request.length());
  OutFrame frame = make_frame(answer);
  if (request.length() == 8 && request.offset() % 8 == 0) {
    // A word (a signal or counter another PE updates atomically): read it atomically.
    const uint64_t word = segment_word(segment_, request.offset()).load(std::memory_order_acquire);
    frame.owned_payload.assign(reinterpret_cast<const char*>(&word), sizeof(word));
  } else {
    std::atomic_thread_fence(std::memory_order_acquire);
    frame.payload = {PutPiece{segment_.base + request.offset(), request.length()}};
  }
  return frame;
}

}  // namespace symmesh
