#include "daemon/control_server.h"

#include <spdlog/spdlog.h>

#include "common/errors.h"
#include "daemon/control_session.h"

namespace symmesh {
namespace {

// How long accepting pauses when the process is out of file descriptors: the connection
// waits in the backlog meanwhile instead of spinning the accept loop.
constexpr auto kFdExhaustedBackoff = std::chrono::milliseconds(100);

}  // namespace

ControlServer::ControlServer(const HostPort& at, std::string secret, Limits limits)
    : accept_strand_(asio::make_strand(io_)),
      acceptor_(io_),
      backoff_(io_),
      secret_(std::move(secret)),
      limits_(limits) {
  asio::error_code ec;
  const asio::ip::tcp::endpoint endpoint(resolve_address(at.host), at.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw InvalidArgument("cannot listen on " + at.str() + ": " + ec.message());
  const auto local = acceptor_.local_endpoint();
  bound_ = HostPort{local.address().to_string(), local.port()};
}

ControlServer::~ControlServer() {
  stop();
}

void ControlServer::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  work_.emplace(io_.get_executor());
  accept_next();
  for (int i = 0; i < std::max(1, limits_.threads); ++i) {
    threads_.emplace_back([this] { io_.run(); });
  }
}

void ControlServer::stop() {
  std::vector<std::shared_ptr<ControlSession>> live;
  {
    std::lock_guard lock(mutex_);  // an accept in flight sees it and keeps no session
    if (stopping_.exchange(true)) return;
    for (auto& [id, weak] : live_) {
      if (auto session = weak.lock()) live.push_back(std::move(session));
    }
    live_.clear();
  }
  // On the acceptor's strand: never at the same time as an accept handler.
  asio::post(accept_strand_, [this] {
    asio::error_code ignored;
    acceptor_.close(ignored);
    backoff_.cancel();
  });
  for (auto& session : live) session->shut();
  live.clear();
  // With the acceptor and every connection closed, the pool runs out of work and returns.
  work_.reset();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
}

void ControlServer::accept_next() {
  acceptor_.async_accept(
      asio::make_strand(io_),
      asio::bind_executor(
          accept_strand_, [this](const asio::error_code& ec, asio::ip::tcp::socket socket) {
            if (stopping_.load()) return;
            if (ec) return on_accept_error(ec);
            if (handshaking_.load() >= limits_.max_handshaking) {
              // Too many unauthenticated connections at once: this one is closed unread.
              handlers_.refused("overload");
              asio::error_code ignored;
              socket.close(ignored);
            } else {
              auto session = std::make_shared<ControlSession>(*this, std::move(socket));
              {
                std::lock_guard lock(mutex_);
                if (stopping_.load()) return;  // stop() has taken the list: no session after it
                std::erase_if(live_, [](const auto& entry) { return entry.second.expired(); });
                live_.emplace(next_id_++, session);
              }
              session->start();
            }
            accept_next();
          }));
}

void ControlServer::on_accept_error(const asio::error_code& ec) {
  if (ec == asio::error::operation_aborted) return;  // closed by stop()
  const bool fds =
      ec == asio::error::no_descriptors || ec == std::errc::too_many_files_open_in_system;
  if (fds) {
    handlers_.refused("fd_exhausted");
    if (!fd_exhaustion_logged_) {
      fd_exhaustion_logged_ = true;
      spdlog::error(
          "control port: out of file descriptors ({}); pausing accepts {} ms at a time (logged "
          "once; counted as symmesh_errors_total{{kind=\"fd_exhausted\"}})",
          ec.message(), kFdExhaustedBackoff.count());
    }
  } else {
    spdlog::warn("control port: accept failed: {}", ec.message());
  }
  backoff_.expires_after(kFdExhaustedBackoff);
  backoff_.async_wait(asio::bind_executor(accept_strand_, [this](const asio::error_code& wait_ec) {
    if (!wait_ec && !stopping_.load()) accept_next();
  }));
}

}  // namespace symmesh
