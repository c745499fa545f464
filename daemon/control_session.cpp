#include "daemon/control_session.h"

#include <spdlog/spdlog.h>

#include "common/errors.h"
#include "daemon/client_requests.h"
#include "transport/frame.h"

namespace symmesh {
namespace {

// A request is a JobSpec or smaller; nothing a client may send after the handshake is larger.
constexpr uint32_t kMaxRequestFrame = 64u << 10;

std::string peer_of(const asio::ip::tcp::socket& socket) {
  asio::error_code ec;
  const auto remote = socket.remote_endpoint(ec);
  return ec ? "unknown peer" : remote.address().to_string() + ":" + std::to_string(remote.port());
}

}  // namespace

ControlSession::ControlSession(ControlServer& server, asio::ip::tcp::socket socket)
    : server_(server),
      socket_(std::move(socket)),
      strand_(socket_.get_executor()),
      timer_(strand_),
      peer_(peer_of(socket_)),
      handshake_(server.secret_, AuthIdentity{wire::ROLE_CONTROL, 0, 0, 0}) {
  server_.handshaking_.fetch_add(1);
}

ControlSession::~ControlSession() {
  if (counted_handshaking_) server_.handshaking_.fetch_sub(1);
  if (counted_session_) server_.sessions_.fetch_sub(1);
}

void ControlSession::start() {
  asio::dispatch(strand_, [self = shared_from_this()] {
    if (self->phase_ == Phase::closed) return;  // shut before it started
    asio::error_code ignored;
    self->socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
    self->arm_timer(kHandshakeTimeout, "timeout");
    self->read_frame();
  });
}

void ControlSession::shut() {
  asio::post(strand_, [self = shared_from_this()] { self->close(); });
}

void ControlSession::close() {
  if (phase_ == Phase::closed) return;
  phase_ = Phase::closed;
  asio::error_code ignored;
  timer_.cancel();
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  out_.clear();
  abandon_ = nullptr;
}

void ControlSession::leave_handshake() {
  if (!counted_handshaking_) return;
  counted_handshaking_ = false;
  server_.handshaking_.fetch_sub(1);
}

void ControlSession::fail(const std::string& kind, const std::string& why) {
  if (phase_ == Phase::closed) return;
  if (!kind.empty()) {
    spdlog::warn("control port: closed {}: {}", peer_, why);
    server_.handlers_.refused(kind);
  }
  // A client that leaves before its job's result gives the job up, unless it detached it.
  if (busy_ && !detached_ && abandon_) {
    spdlog::info("control port: {} left before its job ended: cancelling it", peer_);
    auto abandon = std::move(abandon_);
    try {
      abandon();
    } catch (const std::exception& e) {  // the root is out of reach: the job fails there anyway
      spdlog::warn("control port: could not cancel {}'s job: {}", peer_, e.what());
    }
  }
  close();
}

void ControlSession::arm_timer(std::chrono::steady_clock::duration after, std::string kind) {
  timer_kind_ = std::move(kind);
  timer_.expires_after(after);
  timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
    if (ec || self->phase_ == Phase::closed) return;
    self->fail(self->timer_kind_, self->timer_kind_ == "timeout"
                                      ? "no authentication within the handshake deadline"
                                      : "it stopped reading its answers");
  });
}

void ControlSession::read_frame() {
  asio::async_read(
      socket_, asio::buffer(prefix_),
      [self = shared_from_this()](const asio::error_code& ec, size_t) {
        if (self->phase_ == Phase::closed || self->phase_ == Phase::draining) return;
        if (ec) {
          // A client closing before its hello is no error; garbage or a reset mid-way is.
          const bool quiet = ec == asio::error::eof && self->phase_ != Phase::proof;
          return self->fail(quiet ? "" : "bad_request", "the connection ended: " + ec.message());
        }
        const uint32_t length = read_length_prefix(self->prefix_);
        const uint32_t cap = self->phase_ == Phase::serving ? kMaxRequestFrame : kMaxHandshakeFrame;
        try {
          check_frame_length(length, cap, "request", self->peer_);
        } catch (const Error& e) {
          return self->fail("bad_request", e.what());
        }
        self->body_.assign(length, '\0');
        asio::async_read(self->socket_, asio::buffer(self->body_),
                         [self](const asio::error_code& ec, size_t) {
                           if (self->phase_ == Phase::closed || self->phase_ == Phase::draining) {
                             return;
                           }
                           if (ec) {
                             return self->fail("bad_request", "truncated frame: " + ec.message());
                           }
                           const std::string body = std::move(self->body_);
                           self->body_.clear();
                           self->body_.shrink_to_fit();
                           self->on_frame(body);
                           self->read_next();
                         });
      });
}

void ControlSession::read_next() {
  if (phase_ == Phase::closed || phase_ == Phase::draining) return;
  // A client reads its answers before it asks again: while answers wait unsent, its next
  // request waits in the socket, so pipelined requests cannot pile answers up here.
  if (writing_) {
    read_paused_ = true;
    return;
  }
  read_frame();
}

void ControlSession::on_frame(const std::string& body) {
  try {
    switch (phase_) {
      case Phase::hello:
        return on_hello(body);
      case Phase::proof:
        return on_proof(body);
      case Phase::serving:
        return on_request(body);
      case Phase::draining:
      case Phase::closed:
        return;
    }
  } catch (const PeerError& e) {  // a frame that does not parse
    fail("bad_request", e.what());
  } catch (const std::exception& e) {  // a handler's own failure ends this connection only
    spdlog::error("control port: {}: {}", peer_, e.what());
    fail("", e.what());
  }
}

void ControlSession::refuse(const google::protobuf::MessageLite& reply, const std::string& kind,
                            const std::string& why) {
  // Reads stop; the refusal is written, then the connection closes (write_next), all within
  // the handshake's deadline or the write timeout.
  phase_ = Phase::draining;
  server_.handlers_.refused(kind);
  spdlog::warn("control port: refused {}: {}", peer_, why);
  send(reply);
}

void ControlSession::on_hello(const std::string& body) {
  wire::AuthHello hello;
  parse_frame_body(hello, body, peer_);
  auto step = handshake_.on_client_hello(hello);
  if (!step.refused.empty()) return refuse(step.reply, step.kind, step.refused);
  phase_ = Phase::proof;
  send(step.reply);
}

void ControlSession::on_proof(const std::string& body) {
  wire::AuthProof proof;
  parse_frame_body(proof, body, peer_);
  auto step = handshake_.on_client_proof(proof);
  if (!step.refused.empty()) return refuse(step.reply, step.kind, step.refused);
  leave_handshake();
  timer_.cancel();
  if (server_.sessions_.fetch_add(1) >= server_.limits_.max_sessions) {
    server_.sessions_.fetch_sub(1);
    wire::AuthResult busy;
    busy.set_error("this daemon serves " + std::to_string(server_.limits_.max_sessions) +
                   " control sessions at most: try again when one has closed");
    return refuse(busy, "overload", busy.error());
  }
  counted_session_ = true;
  phase_ = Phase::serving;
  send(step.reply);
}

void ControlSession::on_request(const std::string& body) {
  wire::ClientRequest request;
  parse_frame_body(request, body, peer_);
  if (busy_) {
    return send_error("one request at a time: this connection is waiting for a job's result",
                      wire::REFUSAL_INVALID);
  }
  const bool streams = answers_stream(request);
  if (streams) {
    busy_ = true;
    detached_ = request.detach() || request.has_wait();  // waiting on a job does not own it
  }
  try {
    auto abandon = serve_client_request(
        server_.handlers_, request,
        streams ? job_sink() : [this](const wire::ClientResponse& response) { send(response); });
    if (streams) abandon_ = std::move(abandon);
  } catch (const std::exception& e) {
    busy_ = false;
    const bool bad_request =
        dynamic_cast<const InvalidArgument*>(&e) &&
        (request.has_submit() || request.body_case() == wire::ClientRequest::BODY_NOT_SET);
    if (bad_request) server_.handlers_.refused("bad_request");
    send(refusal(e));
  }
}

ControlServer::Sink ControlSession::job_sink() {
  return [weak = weak_from_this(), strand = strand_](const wire::ClientResponse& response) {
    auto self = weak.lock();
    if (!self) return;  // the client is gone
    asio::post(strand, [self, response] {
      if (self->phase_ != Phase::serving) return;
      const bool last = !response.has_event();
      if (last) {
        self->busy_ = false;
        self->abandon_ = nullptr;
      }
      self->send(response, !last && response.event().state() == wire::JOB_STATE_RUNNING &&
                               response.event().iterations() > 0);
    });
  };
}

void ControlSession::send_error(const std::string& error, wire::RefusalKind kind) {
  wire::ClientResponse response;
  response.set_error(error);
  response.set_refusal(kind);
  send(response);
}

void ControlSession::send(const google::protobuf::MessageLite& message, bool droppable) {
  const size_t cap = server_.limits_.max_queued;
  if (droppable && out_.size() >= cap / 2) return;  // progress: the next one will do
  if (out_.size() >= cap) return fail("slow_client", "it stopped reading its answers");
  std::string frame;
  try {
    frame = encode_frame(message);
  } catch (const InvalidArgument& e) {  // an answer too large for one frame
    wire::ClientResponse error;
    error.set_error(std::string("the answer is too large to send: ") + e.what());
    error.set_refusal(wire::REFUSAL_INVALID);
    frame = encode_frame(error);
  }
  out_.emplace_back(std::move(frame), droppable);
  if (!writing_) write_next();
}

void ControlSession::write_next() {
  if (phase_ == Phase::closed) return;
  if (out_.empty()) {
    writing_ = false;
    if (phase_ == Phase::draining) return close();  // the refusal went out
    if (!counted_handshaking_) timer_.cancel();
    if (read_paused_) {
      read_paused_ = false;
      read_frame();
    }
    return;
  }
  writing_ = true;
  // During the handshake its deadline bounds the writes too.
  if (!counted_handshaking_) arm_timer(server_.limits_.write_timeout, "slow_client");
  asio::async_write(socket_, asio::buffer(out_.front().first),
                    [self = shared_from_this()](const asio::error_code& ec, size_t) {
                      if (ec) return self->fail("", "writing failed: " + ec.message());
                      if (!self->out_.empty()) self->out_.pop_front();
                      self->write_next();
                    });
}

}  // namespace symmesh
