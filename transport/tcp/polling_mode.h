// Whether the io threads are woken for each small frame. While PEs poll the connections (a
// PE that waits reads its frames itself, tcp/pair.h), waking an io thread for a small frame
// is pure cost, and on a host with more threads than cores it is most of a small message's
// latency: the sender pays it inside sendmsg (the wake-up of the epoll waiter), and the woken
// thread then takes a core from a PE. So while PEs poll and none is parked, every
// connection's receive low-water mark (SO_RCVLOWAT) is raised to kRaisedLowWater: the kernel
// wakes no epoll waiter while fewer bytes than that wait (a signal, a barrier's word), and a
// non-blocking recv still returns whatever is there. Data frames are longer, and a request
// some io thread must answer (FLUSH, GET_REQUEST, FETCH_ADD) is padded to the mark by its
// sender, so both still wake the io thread, which reads them while the PEs compute.
// The mark is lowered again, which makes the kernel report bytes already waiting at once,
// as soon as a PE parks (it sleeps, so the io threads must read for it), and when a tick finds
// that no PE started polling since the last tick and none is polling (the PEs went on to
// compute, or the job ended): a small frame that arrives then waits at most about two ticks,
// and nobody was waiting for it (a PE that starts waiting polls first). The tick is long
// because each one wakes an io thread, which takes a core from the PEs' compute.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

namespace symmesh {

class PollingMode {
 public:
  // Above a frame with no payload; far below half the receive buffer (a mark above that makes
  // the kernel grow the buffer and clamp the window to the mark).
  static constexpr int kRaisedLowWater = 256;
  static constexpr std::chrono::microseconds kTick{5000};

  // `set_marks(raised)` raises or lowers every connection's mark; the tick runs on `io`.
  PollingMode(asio::io_context& io, std::function<void(bool raised)> set_marks);

  void start_polling();
  void stop_polling();
  void start_parking();
  void stop_parking();
  // Runs `with(raised)` under the mode's lock: how a new connection gets the current mark.
  void with_mode(const std::function<void(bool raised)>& with);
  // Lowers the marks for good and lets the tick end (shutdown: the io threads may finish).
  void stop();

 private:
  void lower();  // mutex_ held
  void arm_tick();
  void tick();

  std::function<void(bool)> set_marks_;
  asio::steady_timer timer_;
  std::atomic<int> pollers_{0};
  std::atomic<int> parked_{0};
  std::atomic<uint64_t> starts_{0};
  std::atomic<bool> raised_{false};
  std::mutex mutex_;  // raising and lowering, the timer, ticking_, stopped_, starts_seen_
  bool ticking_ = false;
  bool stopped_ = false;
  uint64_t starts_seen_ = 0;
};

}  // namespace symmesh
