// One control connection, from accept to close, on the control server's thread pool: the
// handshake (small frames, one deadline), then requests one at a time, answers through a
// bounded queue. Every handler runs on the connection's strand, so its state needs no lock;
// the sink handed to a job posts onto that strand and never blocks the job's thread.
#pragma once

#include <asio.hpp>
#include <deque>
#include <memory>
#include <string>

#include "daemon/control_server.h"
#include "transport/auth.h"

namespace symmesh {

class ControlSession : public std::enable_shared_from_this<ControlSession> {
 public:
  ControlSession(ControlServer& server, asio::ip::tcp::socket socket);
  ~ControlSession();
  ControlSession(const ControlSession&) = delete;
  ControlSession& operator=(const ControlSession&) = delete;

  void start();
  // From any thread: closes the connection (a job it submitted is not abandoned).
  void shut();

 private:
  // draining: refused, the refusal is being written, then the connection closes.
  enum class Phase { hello, proof, serving, draining, closed };

  void read_frame();
  // Reads the next request, or once the answers queued now are written.
  void read_next();
  void on_frame(const std::string& body);
  void on_hello(const std::string& body);
  void on_proof(const std::string& body);
  void on_request(const std::string& body);
  // Answers on the strand; a droppable answer (a progress event) is dropped, not queued,
  // when the client is behind.
  void send(const google::protobuf::MessageLite& message, bool droppable = false);
  void send_error(const std::string& error, wire::RefusalKind kind);
  // Counts and logs the refusal, writes `reply`, then closes.
  void refuse(const google::protobuf::MessageLite& reply, const std::string& kind,
              const std::string& why);
  void write_next();
  void arm_timer(std::chrono::steady_clock::duration after, std::string kind);
  // Counts `kind` (empty: not an error), logs why, closes.
  void fail(const std::string& kind, const std::string& why);
  void close();
  void leave_handshake();
  ControlServer::Sink job_sink();

  ControlServer& server_;
  asio::ip::tcp::socket socket_;
  asio::any_io_executor strand_;
  asio::steady_timer timer_;
  std::string timer_kind_;
  std::string peer_;
  Phase phase_ = Phase::hello;
  ServerHandshake handshake_;
  bool counted_handshaking_ = true;
  bool counted_session_ = false;
  char prefix_[4] = {};
  std::string body_;
  std::deque<std::pair<std::string, bool>> out_;  // frames, and whether each is droppable
  bool writing_ = false;
  bool read_paused_ = false;  // the next read waits for the answers to go out
  bool busy_ = false;         // a submit or wait is waiting for its result
  bool detached_ = false;
  ControlServer::Abandon abandon_;
};

}  // namespace symmesh
