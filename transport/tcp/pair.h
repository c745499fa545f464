// A tcp pair: one data connection to a peer node (a pair of nodes has connections_per_peer
// of them), driven by the transport's io threads.
// Reading: u32 header length, DataHeader, then the payload straight into the place the
// transport names (the heap for a PUT, once its bounds are checked). Writing: a queue of
// frames, each written whole; the payload of a frame may be borrowed (large puts, get
// replies from the heap) and its completion tells the owner when it may be reused. When
// nothing is queued the sending thread writes the frame itself (non-blocking sendmsg), so a
// small frame costs no hand-over to an io thread; what the kernel does not take at once is
// queued and written by the io threads.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "wire/data.pb.h"

namespace symmesh {

// Set once by an io thread; read by the waiting PE thread.
struct Completion {
  std::atomic<int> state{0};  // 0 pending, 1 done, 2 failed
  std::string error;          // written before state becomes 2
  bool finished() const { return state.load(std::memory_order_acquire) != 0; }
};

struct OutFrame {
  std::string head;  // length prefix and serialized header
  size_t sent = 0;   // bytes of head + payload already written
  const void* payload = nullptr;
  size_t payload_length = 0;
  std::string owned_payload;            // used instead of `payload` when the bytes were copied
  std::shared_ptr<Completion> written;  // optional: done when the bytes are in the kernel
};

OutFrame make_frame(const wire::DataHeader& header);

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

class TcpPair : public std::enable_shared_from_this<TcpPair> {
 public:
  TcpPair(asio::io_context& io, int native_fd, int local_node, int peer_node, uint32_t index,
          std::string peer_name, FrameHandler& handler);

  void start();
  // Any thread: queues a frame. Fails its completion at once when the connection is closed.
  void send(OutFrame frame);
  // Any thread: closes the socket; queued frames fail with `why`.
  void close(const std::string& why);

  int peer_node() const { return peer_node_; }
  uint32_t index() const { return index_; }
  const std::string& peer_name() const { return peer_name_; }
  bool is_open() const { return open_.load(); }

 private:
  void read_prefix();
  void read_header(uint32_t length);
  void read_payload();
  void finish_frame();
  void write_next();
  void fail(const std::string& why);
  // "connection I to node N (host:port): what", the form every failure of this pair takes.
  std::string named(const std::string& what) const;

  asio::strand<asio::io_context::executor_type> strand_;
  asio::ip::tcp::socket socket_;
  int local_node_;
  int peer_node_;
  uint32_t index_;
  std::string peer_name_;
  FrameHandler& handler_;
  std::atomic<bool> open_{true};

  char prefix_[4] = {};
  std::string header_bytes_;
  wire::DataHeader header_;
  std::string discard_;
  std::shared_ptr<void> payload_owner_;

  std::mutex write_mutex_;  // guards queue_ and writing_
  std::deque<OutFrame> queue_;
  bool writing_ = false;  // an io thread owns the socket's write side
};

}  // namespace symmesh
