#include "transport/frame.h"

#include "common/errors.h"

namespace symmesh {

void write_length_prefix(uint32_t length, char out[kLengthPrefixBytes]) {
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) out[i] = static_cast<char>(length >> (8 * i));
}

uint32_t read_length_prefix(const char in[kLengthPrefixBytes]) {
  uint32_t length = 0;
  for (size_t i = 0; i < kLengthPrefixBytes; ++i) {
    length |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  }
  return length;
}

std::string encode_frame(const google::protobuf::MessageLite& message) {
  const size_t size = message.ByteSizeLong();
  if (size > kMaxMessageFrame) {
    throw InvalidArgument("message " + message.GetTypeName() + " of " + std::to_string(size) +
                          " bytes exceeds the frame limit of " + std::to_string(kMaxMessageFrame));
  }
  std::string frame(kLengthPrefixBytes + size, '\0');
  write_length_prefix(static_cast<uint32_t>(size), frame.data());
  message.SerializeToArray(frame.data() + kLengthPrefixBytes, static_cast<int>(size));
  return frame;
}

void check_frame_length(uint32_t length, uint32_t cap, std::string_view what,
                        std::string_view peer) {
  if (length == 0 || length > cap) {
    throw PeerError(std::string(what) + " frame of " + std::to_string(length) + " bytes from " +
                    std::string(peer) + " is outside the allowed 1.." + std::to_string(cap) +
                    " bytes");
  }
}

void parse_frame_body(google::protobuf::MessageLite& message, std::string_view body,
                      std::string_view peer) {
  if (!message.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
    throw PeerError("malformed " + message.GetTypeName() + " frame (" +
                    std::to_string(body.size()) + " bytes) from " + std::string(peer));
  }
}

}  // namespace symmesh
