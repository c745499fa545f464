// libFuzzer: the data-port frame decoder. The input is a byte stream as a peer would send it:
// length-prefixed DataHeader frames, each checked against the cap and the segment bounds the
// tcp transport checks before it touches the heap.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/errors.h"
#include "transport/frame.h"
#include "transport/segment_ops.h"
#include "wire/data.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace symmesh;
  std::string_view stream(reinterpret_cast<const char*>(data), size);
  constexpr size_t kSegment = size_t{64} << 20;
  while (stream.size() >= kLengthPrefixBytes) {
    const uint32_t length = read_length_prefix(stream.data());
    stream.remove_prefix(kLengthPrefixBytes);
    try {
      check_frame_length(length, kMaxDataHeader, "data header", "fuzzer");
      if (length > stream.size()) return 0;
      wire::DataHeader header;
      parse_frame_body(header, stream.substr(0, length), "fuzzer");
      stream.remove_prefix(length);
      check_range(header.offset(), header.length(), kSegment, false);
      check_range(header.signal_offset(), 8, kSegment, true);
    } catch (const Error&) {
      return 0;  // a refusal, as the transport closes the connection
    }
  }
  return 0;
}
