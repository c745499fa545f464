// The tcp buffer: this node's segment as peers' data frames reach it. Every frame's range is
// checked against the segment before a byte of its payload is read; the receiving io thread
// then applies it: a PUT's payload lands in place and its signal (once, after the last
// stripe of a striped put) is a release store or add; atomics are atomic instructions on the
// word; a GET is answered from the segment, a word atomically.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "transport/tcp/pair.h"
#include "transport/transport.h"

namespace symmesh {

class TcpBuffer {
 public:
  explicit TcpBuffer(SegmentView segment) : segment_(segment) {}

  // Empty when the ranges a PUT, GET_REQUEST, ATOMIC_ADD or FETCH_ADD touches fit the
  // segment; otherwise what is wrong and what is allowed.
  std::string check(const wire::DataHeader& header) const;
  // Where a checked PUT's payload goes.
  std::byte* put_target(const wire::DataHeader& header) const {
    return segment_.base + header.offset();
  }
  // A PUT's payload has arrived: publishes it (and applies its signal when this was the
  // last stripe).
  void complete_put(const wire::DataHeader& header);
  void atomic_add(const wire::DataHeader& header);
  // Returns the word's old value.
  uint64_t fetch_add(const wire::DataHeader& header);
  // The GET_REPLY frame answering a GET_REQUEST (its payload borrowed from the segment).
  OutFrame get_reply(const wire::DataHeader& request) const;

 private:
  const SegmentView segment_;
  std::mutex stripes_mutex_;
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> stripes_seen_;  // (src_pe, signal_id)
};

}  // namespace symmesh
