#include "daemon/control_server.h"

#include <spdlog/spdlog.h>

#include <condition_variable>

#include "transport/auth.h"
#include "transport/errors.h"

namespace symmesh {
namespace {
constexpr auto kReplyTimeout = std::chrono::seconds(30);
}

ControlServer::ControlServer(std::unique_ptr<Listener> listener, std::string secret,
                             Handlers handlers)
    : listener_(std::move(listener)), secret_(std::move(secret)), handlers_(std::move(handlers)) {
  accept_thread_ = std::thread([this] { accept_loop(); });
}

ControlServer::~ControlServer() {
  stop();
}

void ControlServer::stop() {
  if (stopping_.exchange(true)) return;
  listener_->stop();
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::thread> threads;
  {
    std::lock_guard lock(mutex_);
    for (auto& client : clients_) client->stop();
    threads.swap(threads_);
  }
  for (auto& thread : threads) thread.join();
}

void ControlServer::accept_loop() {
  while (!stopping_.load()) {
    auto accepted = listener_->accept(deadline_after(std::chrono::milliseconds(200)));
    if (!accepted) continue;
    std::shared_ptr<BlockingChannel> channel(std::move(accepted));
    std::lock_guard lock(mutex_);
    clients_.push_back(channel);
    threads_.emplace_back([this, channel] {
      serve(channel);
      std::lock_guard lock(mutex_);
      clients_.remove(channel);
    });
  }
}

void ControlServer::serve(std::shared_ptr<BlockingChannel> channel) {
  try {
    authenticate(*channel, secret_, AuthIdentity{"control", 0, 0},
                 deadline_after(std::chrono::seconds(10)));
  } catch (const std::exception& e) {
    spdlog::warn("control port: refused {}: {}", channel->peer_name(), e.what());
    handlers_.refused("auth");
    return;
  }
  for (;;) {
    wire::ClientRequest request;
    try {
      channel->read(request, no_deadline());
    } catch (const std::exception&) {
      return;  // the client left (or the daemon stops)
    }
    wire::ClientResponse response;
    if (request.has_status()) {
      *response.mutable_status() = handlers_.status();
    } else if (request.has_submit()) {
      // Events and the result arrive from other threads; the last one ends the request.
      std::mutex mutex;
      std::condition_variable finished;
      bool done = false;
      auto sink = [&](const wire::ClientResponse& message) {
        std::lock_guard lock(mutex);
        if (done) return;
        try {
          channel->write(message, deadline_after(kReplyTimeout));
        } catch (const std::exception& e) {
          spdlog::info("control port: {} left before its job ended: {}", channel->peer_name(),
                       e.what());
        }
        if (message.has_result() || message.has_error()) {
          done = true;
          finished.notify_all();
        }
      };
      try {
        handlers_.submit(request.submit(), sink);
      } catch (const std::exception& e) {
        handlers_.refused("bad_request");
        wire::ClientResponse error;
        error.set_error(e.what());
        sink(error);
      }
      std::unique_lock lock(mutex);
      finished.wait(lock, [&] { return done; });
      continue;
    } else if (request.has_cancel()) {
      try {
        *response.mutable_cancelled() = handlers_.cancel(request.cancel().job_id());
      } catch (const std::exception& e) {
        response.set_error(e.what());
      }
    } else if (request.has_job()) {
      try {
        *response.mutable_job() = handlers_.job(request.job().job_id(), request.job().trace());
      } catch (const std::exception& e) {
        response.set_error(e.what());
      }
    } else {
      handlers_.refused("bad_request");
      response.set_error("unknown request: expected status, submit, cancel or job");
    }
    try {
      channel->write(response, deadline_after(kReplyTimeout));
    } catch (const std::exception&) {
      return;
    }
  }
}

}  // namespace symmesh
