#include "transport/frame.h"

#include <gtest/gtest.h>

#include "common/errors.h"
#include "wire/data.pb.h"
#include "wire/jobs.pb.h"

namespace symmesh {
namespace {

TEST(FrameCodec, RoundTripsAMessage) {
  wire::JobSpec spec;
  spec.mutable_collective()->set_op(wire::COLLECTIVE_OP_ALLREDUCE);
  spec.mutable_collective()->set_bytes(12345);
  const std::string frame = encode_frame(spec);
  ASSERT_GE(frame.size(), kLengthPrefixBytes);
  const uint32_t length = read_length_prefix(frame.data());
  EXPECT_EQ(length, frame.size() - kLengthPrefixBytes);
  wire::JobSpec decoded;
  parse_frame_body(decoded, std::string_view(frame).substr(kLengthPrefixBytes), "test");
  EXPECT_EQ(decoded.collective().op(), wire::COLLECTIVE_OP_ALLREDUCE);
  EXPECT_EQ(decoded.collective().bytes(), 12345u);
}

TEST(FrameCodec, LengthPrefixIsLittleEndian) {
  char prefix[4];
  write_length_prefix(0x01020304, prefix);
  EXPECT_EQ(prefix[0], 0x04);
  EXPECT_EQ(prefix[3], 0x01);
  EXPECT_EQ(read_length_prefix(prefix), 0x01020304u);
}

TEST(FrameCodec, RefusesZeroAndOversizedLengthsNamingThePeer) {
  EXPECT_THROW(check_frame_length(0, kMaxMessageFrame, "JobSpec", "peer-a"), PeerError);
  try {
    check_frame_length(kMaxMessageFrame + 1, kMaxMessageFrame, "JobSpec", "peer-a");
    FAIL();
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("peer-a"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("1..4194304"), std::string::npos);
  }
  EXPECT_NO_THROW(check_frame_length(100, kMaxMessageFrame, "JobSpec", "peer-a"));
}

TEST(FrameCodec, RefusesMalformedBody) {
  wire::DataHeader header;
  const std::string garbage("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11);
  try {
    parse_frame_body(header, garbage, "node 3");
    FAIL();
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("malformed"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("node 3"), std::string::npos);
  }
}

}  // namespace
}  // namespace symmesh
