#include "daemon/join_listener.h"

#include <spdlog/spdlog.h>

#include "common/errors.h"
#include "common/thread_name.h"
#include "daemon/bootstrap.h"
#include "transport/async_handshake.h"
#include "transport/auth.h"

namespace symmesh {

// Authenticates the connection (the client proves first), then reads and checks its hello.
class JoinListener::Handshake : public AsyncHandshake {
 public:
  Handshake(JoinListener& listener, asio::ip::tcp::socket socket, std::string peer)
      : AsyncHandshake(to_generic(listener.io_, std::move(socket)), std::move(peer)),
        listener_(listener),
        auth_(listener.secret_,
              AuthIdentity{wire::ROLE_BOOTSTRAP, 0, listener.cluster_.incarnation(), 0}) {
    ++listener_.handshaking_;
  }
  ~Handshake() override { --listener_.handshaking_; }

 private:
  static asio::generic::stream_protocol::socket to_generic(asio::io_context& io,
                                                           asio::ip::tcp::socket socket) {
    const int family = socket.local_endpoint().protocol().family();  // before the release
    return as_generic(io, family, socket.release());
  }

  void begin() override {
    read(client_hello_, kMaxHandshakeFrame, [this] {
      answer(auth_.on_client_hello(client_hello_), [this] {
        read(proof_, kMaxHandshakeFrame, [this] {
          answer(auth_.on_client_proof(proof_),
                 [this] { read(hello_, kMaxHelloFrame, [this] { checked(); }); });
        });
      });
    });
  }

  // Sends a step's reply, then goes on; a refusal is written, then the connection closes.
  template <class Step>
  void answer(const Step& step, std::function<void()> next) {
    if (step.refused.empty()) return write(step.reply, std::move(next));
    spdlog::warn("bootstrap: refused {}: {}", peer(), step.refused);
    listener_.refused_(step.kind);
    refusal_counted_ = true;  // the write's own end is not counted again
    write(step.reply, [this] { close(); });
  }

  void checked() {
    std::string problem = check_hello(listener_.cluster_, hello_);
    const wire::AuthHello& proved = auth_.client();
    if (problem.empty() && (hello_.node_rank() != proved.node_rank() ||
                            hello_.incarnation() != proved.incarnation())) {
      problem = "the hello claims node " + std::to_string(hello_.node_rank()) + " incarnation " +
                std::to_string(hello_.incarnation()) + ", the handshake proved node " +
                std::to_string(proved.node_rank()) + " incarnation " +
                std::to_string(proved.incarnation());
    }
    auto channel = release();
    if (!problem.empty()) return listener_.refuse(*channel, "bad_request", problem);
    listener_.admit(std::move(hello_), std::move(channel));
  }

  void ended(const std::string& kind, const std::string& why) override {
    if (refusal_counted_) return;
    spdlog::warn("bootstrap: {}: {}", peer(), why);
    listener_.refused_(kind == "closed" ? "bad_request" : kind);
  }

  JoinListener& listener_;
  ServerHandshake auth_;
  wire::AuthHello client_hello_;
  wire::AuthProof proof_;
  wire::NodeHello hello_;
  bool refusal_counted_ = false;
};

JoinListener::JoinListener(const HostPort& at, std::string secret, wire::NodeHello cluster,
                           std::function<void(const std::string&)> refused)
    : secret_(std::move(secret)),
      cluster_(std::move(cluster)),
      refused_(std::move(refused)),
      acceptor_(io_),
      accept_pause_(io_) {
  asio::error_code ec;
  const asio::ip::tcp::endpoint endpoint(resolve_address(at.host), at.port);
  acceptor_.open(endpoint.protocol(), ec);
  if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor_.bind(endpoint, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw InvalidArgument("cannot listen on " + at.str() + ": " + ec.message());
}

JoinListener::~JoinListener() {
  stop();
}

void JoinListener::start() {
  accept_next();
  thread_ = std::thread([this] {
    set_thread_name("join accept");
    run_io(io_, "the bootstrap port");
  });
}

void JoinListener::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  io_.stop();
  if (thread_.joinable()) thread_.join();
  std::lock_guard lock(mutex_);
  waiting_.clear();
}

void JoinListener::on_joined(std::function<void()> callback) {
  std::lock_guard lock(mutex_);
  joined_ = std::move(callback);
}

void JoinListener::accept_next() {
  acceptor_.async_accept([this](const asio::error_code& ec, asio::ip::tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {  // out of descriptors, say: the next try after a pause, not in a spin
      spdlog::warn("bootstrap: accept failed: {}", ec.message());
      accept_pause_.expires_after(kAcceptPause);
      return accept_pause_.async_wait([this](const asio::error_code& e) {
        if (!e) accept_next();
      });
    } else if (handshaking_ >= kMaxHandshaking) {
      refused_("overload");  // closed unread: a real node retries
    } else {
      asio::error_code unknown;
      const auto remote = socket.remote_endpoint(unknown);
      const std::string peer =
          unknown ? "unknown peer"
                  : remote.address().to_string() + ":" + std::to_string(remote.port());
      try {
        std::make_shared<Handshake>(*this, std::move(socket), peer)->start(kHandshakeTimeout);
      } catch (const std::exception& e) {
        spdlog::warn("bootstrap: {}: {}", peer, e.what());
        refused_("bad_request");
      }
    }
    accept_next();
  });
}

void JoinListener::refuse(BlockingChannel& channel, const std::string& kind,
                          const std::string& why) {
  spdlog::error("bootstrap: refused {}: {}", channel.peer_name(), why);
  if (!kind.empty()) refused_(kind);
  wire::BootstrapReply reply;
  reply.set_error(why);
  try {
    channel.write(reply, deadline_after(kHandshakeTimeout));
  } catch (const std::exception&) {
    // Gone already; the refusal is logged here anyway.
  }
}

void JoinListener::admit(wire::NodeHello hello, std::unique_ptr<BlockingChannel> channel) {
  const int node = static_cast<int>(hello.node_rank());
  std::function<void()> joined;
  std::string fenced;
  std::unique_ptr<Joiner> replaced;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    if (fence_) fenced = fence_(hello);
    auto& slot = waiting_[node];
    if (fenced.empty() && slot && slot->hello.incarnation() > hello.incarnation()) {
      fenced = "node " + std::to_string(node) +
               " has a newer daemon waiting to join (incarnation " +
               std::to_string(slot->hello.incarnation()) + "): this one is fenced";
    }
    if (fenced.empty()) {
      spdlog::info("bootstrap: node {} (incarnation {}) joins from {}", node, hello.incarnation(),
                   channel->peer_name());
      replaced = std::move(slot);
      slot = std::make_unique<Joiner>(Joiner{std::move(hello), std::move(channel)});
      joined = joined_;
    } else if (!slot) {
      waiting_.erase(node);
    }
  }
  // Refusals are written outside the lock: a slow peer holds up nobody else.
  if (!fenced.empty()) return refuse(*channel, "fenced", fenced);
  if (replaced)
    refuse(*replaced->channel, "", "a newer hello for node " + std::to_string(node) + " came");
  changed_.notify_all();
  if (joined) joined();
}

std::vector<int> JoinListener::wait_for_all(Deadline deadline,
                                            const std::function<bool()>& give_up) {
  const int nodes = static_cast<int>(cluster_.nodes());
  std::unique_lock lock(mutex_);
  std::vector<int> missing;
  for (;;) {
    missing.clear();
    for (int node = 1; node < nodes; ++node) {
      if (!waiting_.count(node)) missing.push_back(node);
    }
    if (missing.empty() || stopping_ || give_up() || Clock::now() >= deadline) return missing;
    // A slice at a time: `deadline` may be "never", and give_up() is polled as well.
    changed_.wait_for(lock,
                      std::min<Clock::duration>(deadline - Clock::now(), std::chrono::seconds(1)));
  }
}

std::vector<int> JoinListener::waiting() const {
  std::lock_guard lock(mutex_);
  std::vector<int> out;
  for (const auto& [node, joiner] : waiting_) out.push_back(node);
  return out;
}

std::vector<std::unique_ptr<Joiner>> JoinListener::take() {
  std::lock_guard lock(mutex_);
  std::vector<std::unique_ptr<Joiner>> out(cluster_.nodes());
  for (auto& [node, joiner] : waiting_) out.at(node) = std::move(joiner);
  waiting_.clear();
  return out;
}

void JoinListener::fence_with(std::function<std::string(const wire::NodeHello&)> fence) {
  std::lock_guard lock(mutex_);
  fence_ = std::move(fence);
}

void JoinListener::notify() {
  changed_.notify_all();
}

}  // namespace symmesh
