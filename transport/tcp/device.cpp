#include "transport/tcp/device.h"

#include <spdlog/spdlog.h>

#include "common/errors.h"
#include "common/thread_name.h"
#include "transport/auth.h"

namespace symmesh {

TcpDevice::TcpDevice(int node, int nodes, std::string secret, uint64_t incarnation, int io_threads)
    : node_(node), nodes_(nodes), secret_(std::move(secret)), incarnation_(incarnation) {
  for (int i = 0; i < std::max(1, io_threads); ++i) {
    auto io_thread = std::make_unique<IoThread>();
    io_thread->thread = std::thread([&io = io_thread->io, i] {
      set_thread_name("tcp io " + std::to_string(i));
      io.run();
    });
    io_threads_.push_back(std::move(io_thread));
  }
}

asio::io_context& TcpDevice::next_io() {
  return io_threads_[next_io_.fetch_add(1) % io_threads_.size()]->io;
}

TcpDevice::~TcpDevice() {
  stop_accepting();
  stop_io();
}

HostPort TcpDevice::listen(const HostPort& at, Accepted accepted) {
  listener_ = std::make_unique<Listener>(at);
  accept_thread_ = std::thread([this, accepted = std::move(accepted)] {
    set_thread_name("tcp accept");
    accept_loop(accepted);
  });
  return listener_->local_endpoint();
}

void TcpDevice::accept_loop(const Accepted& accepted) {
  while (!stopping_.load()) {
    auto channel = listener_->accept(deadline_after(std::chrono::milliseconds(200)));
    if (!channel) continue;
    try {
      const auto hello = authenticate_server(
          *channel, secret_, AuthIdentity{wire::ROLE_DATA, uint32_t(node_), incarnation_, 0},
          Clock::now() + kHandshakeTimeout);
      if (hello.node_rank() >= uint32_t(nodes_) || hello.node_rank() == uint32_t(node_)) {
        throw PeerError("data connection claims node rank " + std::to_string(hello.node_rank()) +
                        "; allowed: 0.." + std::to_string(nodes_ - 1) + " except " +
                        std::to_string(node_));
      }
      accepted(std::move(channel), int(hello.node_rank()), hello.connection_index());
    } catch (const std::exception& e) {
      spdlog::warn("node {} data listener: refused a connection from {}: {}", node_,
                   channel->peer_name(), e.what());
      const auto* auth = dynamic_cast<const AuthError*>(&e);
      const std::string kind = auth                                    ? auth->kind()
                               : dynamic_cast<const TimeoutError*>(&e) ? "timeout"
                                                                       : "bad_request";
      std::function<void(const std::string&)> callback;
      {
        std::lock_guard lock(mutex_);
        callback = refused_callback_;
      }
      if (callback) callback(kind);
    }
  }
}

std::unique_ptr<BlockingChannel> TcpDevice::dial(const HostPort& to, int peer, uint32_t index,
                                                 Deadline deadline) {
  auto channel = BlockingChannel::connect(to, deadline);
  const auto hello = authenticate_client(
      *channel, secret_, AuthIdentity{wire::ROLE_DATA, uint32_t(node_), incarnation_, index},
      deadline);
  if (static_cast<int>(hello.node_rank()) != peer) {
    throw PeerError("data endpoint " + to.str() + " answered as node " +
                    std::to_string(hello.node_rank()) + ", expected node " + std::to_string(peer));
  }
  return channel;
}

void TcpDevice::on_refused(std::function<void(const std::string&)> callback) {
  std::lock_guard lock(mutex_);
  refused_callback_ = std::move(callback);
}

void TcpDevice::stop_accepting() {
  if (stopping_.exchange(true)) return;
  if (listener_) listener_->stop();
  if (accept_thread_.joinable()) accept_thread_.join();
}

void TcpDevice::stop_io() {
  for (auto& io_thread : io_threads_) io_thread->work.reset();
  for (auto& io_thread : io_threads_) {
    if (io_thread->thread.joinable()) io_thread->thread.join();
  }
}

}  // namespace symmesh
