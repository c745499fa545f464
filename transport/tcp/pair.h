// A tcp pair: one data connection to a peer node (a pair of nodes has connections_per_peer
// of them), driven by the transport's io threads and by the PEs waiting on the node.
// Reading: a FrameReader (tcp/frame_reader.h) takes each frame's payload straight into the
// place the transport names (the heap for a PUT, once its bounds are checked). Whichever
// thread gets there reads: the io thread when epoll reports the socket readable, or a PE
// that waits for a signal and polls (poll()), so the frame it waits for is applied by a
// thread already running rather than by an io thread that must first be scheduled (on a
// host with more threads than cores, that is most of a small message's latency).
// Writing: a queue of frames, each written whole. The payload of a frame may be borrowed
// (large puts, get replies from the heap), and its completion tells the owner when it may be
// reused; a gathered put's payload is its pieces, handed to the kernel 64 parts per sendmsg,
// the head being one of them. When nothing is queued the sending thread writes the frame
// itself (non-blocking sendmsg), so a small frame costs no hand-over to an io thread; what the
// kernel does not take at once is queued and written by the io threads.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/tcp/frame_reader.h"
#include "transport/transport.h"
#include "wire/data.pb.h"

namespace symmesh {

// Set once by an io thread; read by the waiting PE thread.
struct Completion {
  std::atomic<int> state{0};  // 0 pending, 1 done, 2 failed
  std::string error;          // written before state becomes 2
  bool finished() const { return state.load(std::memory_order_acquire) != 0; }
};

struct OutFrame {
  std::string head;                     // length prefix and serialized header
  size_t sent = 0;                      // bytes of head + payload already written
  std::vector<PutPiece> payload;        // borrowed, written end to end
  std::string owned_payload;            // used instead of `payload` when the bytes were copied
  std::shared_ptr<Completion> written;  // optional: done when the bytes are in the kernel
};

OutFrame make_frame(const wire::DataHeader& header);
// A request an io thread of the receiver must answer (FLUSH, GET_REQUEST, FETCH_ADD): padded
// to the raised receive low-water mark, so it wakes that thread even while the receiver's
// PEs poll (tcp/polling_mode.h).
OutFrame make_request(wire::DataHeader header);

class TcpPair;

// What a connection asks of its transport.
class FrameHandler {
 public:
  virtual ~FrameHandler() = default;
  // Where the payload of `header` goes; nullptr with `error` set refuses the frame.
  // `keep_alive` holds whatever owns the target until the payload has been read.
  virtual std::byte* payload_target(TcpPair& from, const wire::DataHeader& header,
                                    std::string& error, std::shared_ptr<void>& keep_alive) = 0;
  // The frame (and its payload) has arrived.
  virtual void frame_complete(TcpPair& from, const wire::DataHeader& header) = 0;
  virtual void frame_written() = 0;
  virtual void connection_lost(TcpPair& connection, const std::string& why) = 0;
};

class TcpPair : public std::enable_shared_from_this<TcpPair>, private FrameReader::Sink {
 public:
  TcpPair(asio::io_context& io, int native_fd, int local_node, int peer_node, uint32_t index,
          std::string peer_name, FrameHandler& handler);

  void start();
  // Any thread: reads and applies the frames that have arrived, unless another thread is
  // reading this connection; returns how many it applied.
  int poll();
  // Any thread: queues a frame. Fails its completion at once when the connection is closed.
  void send(OutFrame frame);
  // Any thread: the socket's receive low-water mark (SO_RCVLOWAT; see tcp/polling_mode.h).
  void set_receive_low_water(int bytes);
  // Any thread: closes the socket; queued frames fail with `why`.
  void close(const std::string& why);

  int peer_node() const { return peer_node_; }
  uint32_t index() const { return index_; }
  const std::string& peer_name() const { return peer_name_; }
  bool is_open() const { return open_.load(); }

 private:
  // A poll reads at most about this much, so a waiting PE goes back to its own condition; an
  // io thread reads more before letting the connections it also serves have a turn.
  static constexpr size_t kPollBudget = 64 << 10;
  static constexpr size_t kIoBudget = 4 << 20;

  // Strand: waits until epoll reports the socket readable, then reads (read_readable).
  void watch_readable();
  void read_readable();
  // Takes the reader unless another thread holds it (that thread then reads what came, or
  // hands it to the io thread), reads up to `budget` bytes; what is left over is handed to
  // the io thread (resume_on_io), and so is a stream the io thread found busy while a PE
  // (`on_io` false) read, and a large payload: a PE reads small frames, not a bulk transfer.
  int read_turn(size_t budget, bool on_io);
  void resume_on_io();
  // FrameReader::Sink
  std::byte* payload_target(const wire::DataHeader& header, std::string& error) override;
  void frame_complete(const wire::DataHeader& header) override;

  void write_next();
  void fail(const std::string& why);
  // "connection I to node N (host:port): what", the form every failure of this pair takes.
  std::string named(const std::string& what) const;

  asio::strand<asio::io_context::executor_type> strand_;
  asio::ip::tcp::socket socket_;
  const int fd_;  // socket_'s, read by threads off the strand; closed only by fail()
  int local_node_;
  int peer_node_;
  uint32_t index_;
  std::string peer_name_;
  FrameHandler& handler_;
  std::atomic<bool> open_{true};

  // The read side. The thread that set `reading_` owns reader_ and payload_owner_. Epoll
  // reports a readable socket once (edge-triggered), so an io thread that finds the reader
  // taken sets `readable_` and the owner reads again after letting go. fail() takes the
  // reader for good before it closes the fd, so no thread reads a closed (or reused) fd.
  FrameReader reader_;
  std::shared_ptr<void> payload_owner_;
  std::atomic<bool> reading_{false};
  std::atomic<bool> readable_{false};
  std::atomic<bool> resume_posted_{false};

  std::mutex write_mutex_;  // guards queue_ and writing_
  // A thread is in send_now or frames wait for the io thread to write them (a hint for poll()).
  std::atomic<bool> write_busy_{false};
  std::deque<OutFrame> queue_;
  bool writing_ = false;  // an io thread owns the socket's write side
};

}  // namespace symmesh
