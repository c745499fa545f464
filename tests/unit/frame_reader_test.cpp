// The tcp data frame reader over a socket pair: frames that arrive whole, in pieces and
// several at once come out the same; a large payload lands in its target; an unwanted one is
// dropped; a bad header or a closed stream fails with what was wrong; a budget stops early.
#include "transport/tcp/frame_reader.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <vector>

#include "transport/tcp/pair.h"

namespace symmesh {
namespace {

struct SocketPair {
  int reader = -1;
  int writer = -1;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    reader = fds[0];
    writer = fds[1];
  }
  ~SocketPair() {
    ::close(reader);
    if (writer >= 0) ::close(writer);
  }
  void write(const std::string& bytes) const {
    ASSERT_EQ(::send(writer, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
  }
  void close_writer() {
    ::close(writer);
    writer = -1;
  }
};

// A PUT frame of `payload` to offset `offset`, as a sender puts it on the wire.
std::string put_frame(uint64_t offset, const std::string& payload) {
  wire::DataHeader header;
  header.set_kind(wire::PUT);
  header.set_offset(offset);
  header.set_length(payload.size());
  return make_frame(header).head + payload;
}

// Records every frame and gives each PUT payload its own buffer (none for offset 999: dropped).
struct RecordingSink : FrameReader::Sink {
  std::vector<std::pair<uint64_t, std::string>> frames;
  std::deque<std::string> targets;  // a deque: a target never moves
  std::byte* payload_target(const wire::DataHeader& header, std::string& error) override {
    if (header.offset() == 666) error = "offset 666 refused";
    if (header.offset() == 999 || !error.empty()) return nullptr;
    targets.emplace_back(header.length(), '\0');
    return reinterpret_cast<std::byte*>(targets.back().data());
  }
  void frame_complete(const wire::DataHeader& header) override {
    frames.emplace_back(header.offset(), header.offset() == 999 ? "" : targets.back());
  }
};

std::string pattern(size_t bytes, int seed) {
  std::string text(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) text[i] = static_cast<char>((i * 31 + seed) % 251);
  return text;
}

TEST(FrameReader, FramesArrivingWholeInPiecesOrTogetherComeOutTheSame) {
  const std::vector<std::string> payloads = {pattern(8, 1), "", pattern(3000, 2),
                                             pattern(FrameReader::kDirectPayloadBytes * 5, 3)};
  std::string stream;
  for (size_t i = 0; i < payloads.size(); ++i) stream += put_frame(i, payloads[i]);
  for (size_t piece : {stream.size(), size_t{1}, size_t{7}, size_t{4099}}) {
    SocketPair sockets;
    FrameReader reader;
    RecordingSink sink;
    int frames = 0;
    for (size_t at = 0; at < stream.size(); at += piece) {
      sockets.write(stream.substr(at, piece));
      const auto result = reader.read(sockets.reader, size_t{1} << 30, sink);
      ASSERT_EQ(result.stopped, FrameReader::Stopped::kDrained) << result.failure;
      frames += result.frames;
    }
    EXPECT_EQ(frames, static_cast<int>(payloads.size())) << "pieces of " << piece;
    ASSERT_EQ(sink.frames.size(), payloads.size());
    for (size_t i = 0; i < payloads.size(); ++i) {
      EXPECT_EQ(sink.frames[i].first, i);
      EXPECT_EQ(sink.frames[i].second, payloads[i]) << "frame " << i << ", pieces of " << piece;
    }
  }
}

TEST(FrameReader, APayloadNobodyWantsIsDroppedAndTheNextFrameStillArrives) {
  SocketPair sockets;
  FrameReader reader;
  RecordingSink sink;
  sockets.write(put_frame(999, pattern(FrameReader::kInboxBytes * 3, 4)) +
                put_frame(5, pattern(100, 5)));
  const auto result = reader.read(sockets.reader, size_t{1} << 30, sink);
  ASSERT_EQ(result.stopped, FrameReader::Stopped::kDrained) << result.failure;
  ASSERT_EQ(sink.frames.size(), 2u);
  EXPECT_EQ(sink.frames[1], std::make_pair(uint64_t{5}, pattern(100, 5)));
  EXPECT_EQ(sink.targets.size(), 1u) << "the dropped payload got no target";
}

TEST(FrameReader, ABudgetStopsTheReadAndTheNextReadGoesOn) {
  SocketPair sockets;
  FrameReader reader;
  RecordingSink sink;
  const std::string payload = pattern(FrameReader::kDirectPayloadBytes * 8, 6);
  sockets.write(put_frame(1, payload));
  const auto first = reader.read(sockets.reader, FrameReader::kDirectPayloadBytes, sink);
  EXPECT_EQ(first.stopped, FrameReader::Stopped::kBudgetSpent);
  EXPECT_EQ(first.frames, 0);
  FrameReader::Result rest;
  for (int turn = 0; turn < 1000 && sink.frames.empty(); ++turn) {
    rest = reader.read(sockets.reader, FrameReader::kDirectPayloadBytes, sink);
    ASSERT_NE(rest.stopped, FrameReader::Stopped::kFailed) << rest.failure;
  }
  ASSERT_EQ(sink.frames.size(), 1u);
  EXPECT_EQ(sink.frames[0].second, payload);
}

TEST(FrameReader, ABadHeaderARefusedFrameOrAClosedStreamFailsNamingWhy) {
  struct Case {
    std::string bytes;
    bool close;
    std::string expected;
  };
  std::string too_long(kLengthPrefixBytes, '\0');
  write_length_prefix(kMaxDataHeader + 1, too_long.data());
  std::string garbage(kLengthPrefixBytes, '\0');
  write_length_prefix(3, garbage.data());
  garbage += "\xff\xff\xff";
  const std::vector<Case> cases = {
      {too_long, false, "outside the allowed 1..512"},
      {garbage, false, "malformed DataHeader (3 bytes)"},
      {put_frame(666, "x"), false, "offset 666 refused"},
      {put_frame(1, "abc").substr(0, 6), true, "closed by the peer"},
  };
  for (const auto& c : cases) {
    SocketPair sockets;
    FrameReader reader;
    RecordingSink sink;
    sockets.write(c.bytes);
    if (c.close) sockets.close_writer();
    const auto result = reader.read(sockets.reader, size_t{1} << 30, sink);
    EXPECT_EQ(result.stopped, FrameReader::Stopped::kFailed);
    EXPECT_NE(result.failure.find(c.expected), std::string::npos) << result.failure;
    EXPECT_TRUE(sink.frames.empty());
    EXPECT_TRUE(reader.failed());
    EXPECT_EQ(reader.read(sockets.reader, 1, sink).stopped, FrameReader::Stopped::kFailed)
        << "a broken stream stays broken";
  }
}

}  // namespace
}  // namespace symmesh
