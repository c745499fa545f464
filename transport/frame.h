// The frame codec: a u32 little-endian length, then that many bytes of a serialized
// protobuf message. Lengths are checked against a hard cap before anything is allocated.
#pragma once

#include <google/protobuf/message_lite.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace symmesh {

// Bootstrap, control and client messages.
inline constexpr uint32_t kMaxMessageFrame = 4u << 20;
// The header of a TCP data frame (its payload is bounded by the heap, not by this).
inline constexpr uint32_t kMaxDataHeader = 512;
inline constexpr size_t kLengthPrefixBytes = 4;

// The whole frame: prefix and serialized message.
std::string encode_frame(const google::protobuf::MessageLite& message);
void write_length_prefix(uint32_t length, char out[kLengthPrefixBytes]);
uint32_t read_length_prefix(const char in[kLengthPrefixBytes]);

// Throws PeerError naming `peer` when `length` is zero or above `cap`.
void check_frame_length(uint32_t length, uint32_t cap, std::string_view what,
                        std::string_view peer);
// Throws PeerError naming `peer` and the message type when `body` does not parse.
void parse_frame_body(google::protobuf::MessageLite& message, std::string_view body,
                      std::string_view peer);

}  // namespace symmesh
