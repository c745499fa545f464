// The server side of an opening conversation on an asio thread: a frame that completes as the
// deadline passes ends the conversation once, answered or timed out, and never throws out of
// the io_context (the thread serves every other connection); a frame past its cap is refused
// before anything is allocated for it.
#include "transport/async_handshake.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include "wire/attach.pb.h"

namespace symmesh {
namespace {

class OneRequest : public AsyncHandshake {
 public:
  OneRequest(asio::generic::stream_protocol::socket socket, std::string& outcome)
      : AsyncHandshake(std::move(socket), "a test peer"), outcome_(outcome) {}

 private:
  void begin() override {
    read(request_, 64, [this] { outcome_ += release() ? "answered" : "no channel"; });
  }
  void ended(const std::string& kind, const std::string&) override { outcome_ += kind; }

  wire::AttachRequest request_;
  std::string& outcome_;
};

// A conversation over a socket pair whose other end has written `bytes` and stays open.
std::string converse(const std::string& bytes, std::chrono::milliseconds limit) {
  asio::io_context io;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) return "socketpair failed";
  if (::write(pair[1], bytes.data(), bytes.size()) != ssize_t(bytes.size())) return "short write";
  std::string outcome;
  std::make_shared<OneRequest>(as_generic(io, AF_UNIX, pair[0]), outcome)->start(limit);
  try {
    io.run();
  } catch (const std::exception& e) {
    outcome += std::string("threw: ") + e.what();
  }
  ::close(pair[1]);
  return outcome;
}

TEST(AsyncHandshake, AFrameThatCompletesAsTheDeadlinePassesEndsItOnceAndNeverThrows) {
  wire::AttachRequest request;
  request.set_protocol_version(1);
  request.set_local_rank(3);
  const std::string frame = encode_frame(request);
  for (int i = 0; i < 300; ++i) {  // the deadline (0 ms) and the frame land in one pass
    const std::string outcome = converse(frame, std::chrono::milliseconds(0));
    ASSERT_TRUE(outcome == "answered" || outcome == "timeout") << "round " << i << ": " << outcome;
  }
  EXPECT_EQ(converse(frame, std::chrono::seconds(5)), "answered");
  EXPECT_EQ(converse(frame.substr(0, 3), std::chrono::milliseconds(20)), "timeout");
}

TEST(AsyncHandshake, AFramePastItsCapIsRefusedBeforeItsBodyIsRead) {
  std::string prefix(kLengthPrefixBytes, '\0');
  write_length_prefix(1u << 30, prefix.data());  // a gigabyte claimed, nothing sent
  EXPECT_EQ(converse(prefix, std::chrono::seconds(5)), "bad_request");
}

}  // namespace
}  // namespace symmesh
