// When the tcp connections' receive marks are raised (PEs poll, so small frames wake no io
// thread) and when they are lowered again: a PE that parks, PEs that stopped polling for a
// tick, a shutdown. A mark left raised with nobody polling would leave frames unread. And
// which frames stay below the mark.
#include "transport/tcp/polling_mode.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "transport/frame.h"
#include "transport/tcp/pair.h"
#include "transport/wait.h"

namespace symmesh {
namespace {

constexpr auto kTimeout = std::chrono::seconds(10);

// The marks' history, and an io thread for the tick.
struct Harness {
  std::mutex mutex;
  std::vector<bool> changes;
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  PollingMode mode{io, [this](bool raised) {
                     std::lock_guard lock(mutex);
                     changes.push_back(raised);
                   }};
  std::thread io_thread{[this] { io.run(); }};

  ~Harness() {
    mode.stop();
    work.reset();
    io_thread.join();
  }
  std::vector<bool> history() {
    std::lock_guard lock(mutex);
    return changes;
  }
  bool raised() {
    const auto h = history();
    return !h.empty() && h.back();
  }
};

TEST(PollingMode, PollingRaisesTheMarksOnceAndAParkingPeLowersThemAtOnce) {
  Harness h;
  h.mode.start_polling();
  h.mode.start_polling();
  EXPECT_EQ(h.history(), std::vector<bool>{true}) << "raised once for two pollers";
  h.mode.start_parking();
  EXPECT_EQ(h.history(), (std::vector<bool>{true, false})) << "a parked PE needs the io threads";
  h.mode.stop_polling();
  h.mode.start_polling();
  EXPECT_FALSE(h.raised()) << "never raised while a PE is parked";
  h.mode.stop_parking();
  h.mode.stop_polling();
  h.mode.stop_polling();
  h.mode.start_polling();
  EXPECT_TRUE(h.raised()) << "raised again once nobody is parked";
  h.mode.stop_polling();
}

TEST(PollingMode, MarksRaisedWhileNobodyPollsAreLoweredByTheTick) {
  Harness h;
  h.mode.start_polling();
  h.mode.stop_polling();  // the PE found its condition and went on to compute
  ASSERT_TRUE(h.raised());
  const Deadline until = deadline_after(kTimeout);
  while (h.raised() && Clock::now() < until) std::this_thread::yield();
  EXPECT_FALSE(h.raised()) << "the tick never lowered the marks";
}

TEST(PollingMode, APollerKeepsTheMarksRaisedAcrossTicks) {
  Harness h;
  h.mode.start_polling();  // one long poll, as a PE waiting out a slow peer
  const Deadline until = Clock::now() + 4 * PollingMode::kTick;
  while (Clock::now() < until) std::this_thread::yield();  // bounded: 4 ticks
  EXPECT_EQ(h.history(), std::vector<bool>{true});
  h.mode.stop_polling();
}

TEST(PollingMode, AfterStopTheMarksStayLowered) {
  Harness h;
  h.mode.start_polling();
  h.mode.stop();
  h.mode.stop_polling();
  h.mode.start_polling();
  EXPECT_EQ(h.history(), (std::vector<bool>{true, false}));
  bool raised_for_new_connection = true;
  h.mode.with_mode([&](bool raised) { raised_for_new_connection = raised; });
  EXPECT_FALSE(raised_for_new_connection);
  h.mode.stop_polling();
}

// The mark separates what wakes the io threads while PEs poll from what does not: a signal
// (the frame of a barrier) stays below it, a request an io thread must answer reaches it.
TEST(PollingMode, ASignalStaysBelowTheMarkAndARequestReachesIt) {
  wire::DataHeader signal;
  signal.set_kind(wire::PUT);
  signal.set_src_pe(1023);
  signal.set_offset(uint64_t{1} << 40);
  signal.set_has_signal(true);
  signal.set_signal_offset(uint64_t{1} << 40);
  signal.set_signal_value(~uint64_t{0});
  signal.set_signal_id(~uint64_t{0});
  EXPECT_LT(make_frame(signal).head.size(), size_t(PollingMode::kRaisedLowWater));
  for (auto kind : {wire::FLUSH, wire::GET_REQUEST, wire::FETCH_ADD}) {
    wire::DataHeader request;
    request.set_kind(kind);
    request.set_token(7);
    request.set_offset(4096);
    request.set_length(8);
    const OutFrame frame = make_request(request);
    EXPECT_GE(frame.head.size(), size_t(PollingMode::kRaisedLowWater)) << wire::DataKind_Name(kind);
    EXPECT_LE(frame.head.size(), kLengthPrefixBytes + kMaxDataHeader);
    wire::DataHeader parsed;
    ASSERT_TRUE(parsed.ParseFromArray(frame.head.data() + kLengthPrefixBytes,
                                      int(frame.head.size() - kLengthPrefixBytes)));
    EXPECT_EQ(parsed.kind(), kind);
    EXPECT_EQ(parsed.token(), 7u);
  }
}

}  // namespace
}  // namespace symmesh
