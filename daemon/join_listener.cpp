#include "daemon/join_listener.h"

#include <spdlog/spdlog.h>

#include "common/errors.h"
#include "common/thread_name.h"
#include "daemon/bootstrap.h"
#include "transport/auth.h"

namespace symmesh {

JoinListener::JoinListener(const HostPort& at, std::string secret, wire::NodeHello cluster,
                           std::function<void(const std::string&)> refused)
    : listener_(at),
      secret_(std::move(secret)),
      cluster_(std::move(cluster)),
      refused_(std::move(refused)) {}

JoinListener::~JoinListener() {
  stop();
}

void JoinListener::start() {
  accept_thread_ = std::thread([this] {
    set_thread_name("join accept");
    accept_loop();
  });
  for (int i = 0; i < kWorkers; ++i) workers_.emplace_back([this] { work_loop(); });
}

void JoinListener::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& channel : accepted_) channel->stop();
  }
  changed_.notify_all();
  listener_.stop();
  if (accept_thread_.joinable()) accept_thread_.join();
  for (auto& worker : workers_) worker.join();
  workers_.clear();
  std::lock_guard lock(mutex_);
  accepted_.clear();
  waiting_.clear();
}

void JoinListener::on_joined(std::function<void()> callback) {
  std::lock_guard lock(mutex_);
  joined_ = std::move(callback);
}

void JoinListener::accept_loop() {
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    auto channel = listener_.accept(deadline_after(std::chrono::milliseconds(200)));
    if (!channel) continue;
    std::lock_guard lock(mutex_);
    if (accepted_.size() >= kMaxAccepted) {
      refused_("overload");  // closed unread: a real node retries
      continue;
    }
    accepted_.push_back(std::move(channel));
    changed_.notify_all();
  }
}

void JoinListener::work_loop() {
  for (;;) {
    std::unique_ptr<BlockingChannel> channel;
    {
      std::unique_lock lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !accepted_.empty(); });
      if (stopping_) return;
      channel = std::move(accepted_.front());
      accepted_.pop_front();
    }
    admit(std::move(channel));
  }
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

void JoinListener::admit(std::unique_ptr<BlockingChannel> channel) {
  wire::NodeHello hello;
  try {
    const Deadline deadline = deadline_after(kHandshakeTimeout);
    const auto identity = authenticate_server(
        *channel, secret_, AuthIdentity{wire::ROLE_BOOTSTRAP, 0, cluster_.incarnation(), 0},
        deadline);
    channel->read(hello, deadline, kMaxHelloFrame);
    std::string problem = check_hello(cluster_, hello);
    if (problem.empty() && (hello.node_rank() != identity.node_rank() ||
                            hello.incarnation() != identity.incarnation())) {
      problem = "the hello claims node " + std::to_string(hello.node_rank()) + " incarnation " +
                std::to_string(hello.incarnation()) + ", the handshake proved node " +
                std::to_string(identity.node_rank()) + " incarnation " +
                std::to_string(identity.incarnation());
    }
    if (!problem.empty()) return refuse(*channel, "bad_request", problem);
  } catch (const AuthError& e) {
    spdlog::warn("bootstrap: refused {}: {}", channel->peer_name(), e.what());
    refused_(e.kind());
    return;
  } catch (const TimeoutError& e) {
    spdlog::warn("bootstrap: {}: {}", channel->peer_name(), e.what());
    refused_("timeout");
    return;
  } catch (const std::exception& e) {
    spdlog::warn("bootstrap: {}: {}", channel->peer_name(), e.what());
    refused_("bad_request");
    return;
  }
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
