#include "daemon/status/status_server.h"

#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstring>
#include <optional>

#include "common/errors.h"
#include "common/thread_name.h"
#include "daemon/status/dashboard_page.h"

namespace symmesh {
namespace {

constexpr auto kSweep = std::chrono::milliseconds(250);  // the longest between deadline checks
constexpr const char* kText = "text/plain; charset=utf-8";
constexpr const char* kPaths =
    "/ (the dashboard), /health, /status, /metrics, /jobs/ID/trace (at the root)";

std::string cannot_bind(const HostPort& address, const std::string& why) {
  return "cannot bind the status endpoint to " + address.str() + " (" + why +
         "); set --status-addr HOST:PORT, or off";
}

// The socket address to bind: `address`'s host may be a name or a numeric address.
sockaddr_storage bind_address(const HostPort& address) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int failed =
      ::getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &found);
  if (failed || !found) throw InvalidArgument(cannot_bind(address, ::gai_strerror(failed)));
  sockaddr_storage at{};
  std::memcpy(&at, found->ai_addr, std::min<size_t>(found->ai_addrlen, sizeof at));
  ::freeaddrinfo(found);
  return at;
}

// Connections refused at a cap or closed at a deadline are routine under a flood: debug level.
void log_from_server(void*, const char* format, va_list arguments) {
  char line[512];
  std::vsnprintf(line, sizeof line, format, arguments);
  std::string text(line);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  spdlog::debug("status endpoint: {}", text);
}

// The ID of a path /jobs/ID/trace (1 to 19 digits, so it fits 64 bits).
std::optional<uint64_t> traced_job(const std::string& path) {
  const std::string head = "/jobs/", tail = "/trace";
  if (!path.starts_with(head) || !path.ends_with(tail)) return std::nullopt;
  const std::string id = path.substr(head.size(), path.size() - head.size() - tail.size());
  if (id.empty() || id.size() > 19 || !std::all_of(id.begin(), id.end(), ::isdigit)) {
    return std::nullopt;
  }
  return std::stoull(id);
}

}  // namespace

struct StatusServer::Reply {
  unsigned status = 200;
  std::string body;
  std::string type = kText;
};

struct StatusServer::Page {
  std::string method, path;
  Reply reply;
  std::atomic<bool> made{false};
};

namespace {

// Whether a page reads the daemon's state under its locks: made on the worker, not here.
bool slow_page(const std::string& method, const std::string& path) {
  return (method == "GET" || method == "HEAD") &&
         (path == "/status" || path == "/metrics" || traced_job(path));
}

}  // namespace

struct StatusServer::Callbacks {
  static MHD_Result answer(void* self, MHD_Connection* connection, const char* url,
                           const char* method, const char*, const char*, size_t*, void** request) {
    auto& server = *static_cast<StatusServer*>(self);
    if (auto* page = static_cast<Page*>(*request)) {  // resumed: the worker made it
      return page->made.load(std::memory_order_acquire) ? send(connection, page->reply) : MHD_YES;
    }
    server.deadlines_.headers_in(connection);
    if (!slow_page(method, url)) return send(connection, server.route(method, url));
    auto* page = new Page{method, url, {}, {}};
    *request = page;  // freed by request_done, however the request ends
    if (server.defer(connection, page)) return MHD_YES;
    return send(connection, Reply{MHD_HTTP_SERVICE_UNAVAILABLE,
                                  "the status endpoint has " + std::to_string(kMaxQueuedPages) +
                                      " pages in the making: try again\n"});
  }

  static MHD_Result send(MHD_Connection* connection, const Reply& reply) {
    MHD_Response* response = MHD_create_response_from_buffer(
        reply.body.size(), const_cast<char*>(reply.body.data()), MHD_RESPMEM_MUST_COPY);
    if (!response) return MHD_NO;  // no memory: the connection is closed
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.type.c_str());
    if (reply.status == MHD_HTTP_METHOD_NOT_ALLOWED) {
      MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    }
    const MHD_Result queued = MHD_queue_response(connection, reply.status, response);
    MHD_destroy_response(response);
    return queued;
  }

  static void connection_changed(void* self, MHD_Connection* connection, void**,
                                 MHD_ConnectionNotificationCode what) {
    auto& server = *static_cast<StatusServer*>(self);
    if (what != MHD_CONNECTION_NOTIFY_STARTED) return server.deadlines_.closed(connection);
    const MHD_ConnectionInfo* info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    server.deadlines_.waiting(connection, info ? info->connect_fd : -1);
  }

  // A response is done: a kept-alive connection's next headers are due from now.
  static void request_done(void* self, MHD_Connection* connection, void** request,
                           MHD_RequestTerminationCode) {
    delete static_cast<Page*>(*request);
    *request = nullptr;
    static_cast<StatusServer*>(self)->deadlines_.waiting(connection, -1);
  }
};

StatusServer::StatusServer(const HostPort& address, Handlers handlers)
    : handlers_(std::move(handlers)), bound_(address) {
  sockaddr_storage at = bind_address(address);
  // No MHD_USE_INTERNAL_POLLING_THREAD: run() drives its epoll set, on one thread.
  unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
  if (at.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  server_ =
      MHD_start_daemon(flags, address.port, nullptr, nullptr, &Callbacks::answer, this,         //
                       MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&at),                  //
                       MHD_OPTION_CONNECTION_LIMIT, kMaxStatusConnections,                      //
                       MHD_OPTION_PER_IP_CONNECTION_LIMIT, kMaxStatusConnectionsPerSource,      //
                       MHD_OPTION_CONNECTION_TIMEOUT, unsigned(kIdleLimit.count()),             //
                       MHD_OPTION_CONNECTION_MEMORY_LIMIT, kConnectionMemory,                   //
                       MHD_OPTION_NOTIFY_CONNECTION, &Callbacks::connection_changed, this,      //
                       MHD_OPTION_NOTIFY_COMPLETED, &Callbacks::request_done, this,             //
                       MHD_OPTION_EXTERNAL_LOGGER, &log_from_server, nullptr, MHD_OPTION_END);  //
  if (!server_)
    throw InvalidArgument(cannot_bind(address, "in use, or not an address of this host"));
  bound_.port = MHD_get_daemon_info(server_, MHD_DAEMON_INFO_BIND_PORT)->port;
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) {
    MHD_stop_daemon(server_);
    throw Error(std::string("eventfd failed: ") + std::strerror(errno));
  }
  worker_ = std::thread([this] {
    set_thread_name("status pages");
    make_pages();
  });
  thread_ = std::thread([this] {
    set_thread_name("status http");
    run();
  });
}

StatusServer::~StatusServer() {
  stop_making_pages();  // every suspended connection is resumed first, as MHD requires
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  MHD_stop_daemon(server_);  // on this thread now: the loop has ended
  ::close(stop_fd_);
}

void StatusServer::run() {
  const int epoll_fd = MHD_get_daemon_info(server_, MHD_DAEMON_INFO_EPOLL_FD)->epoll_fd;
  pollfd watched[2] = {{epoll_fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
  for (;;) {
    MHD_UNSIGNED_LONG_LONG wait_ms = kSweep.count(), due_ms = 0;
    if (MHD_get_timeout(server_, &due_ms) == MHD_YES) wait_ms = std::min(wait_ms, due_ms);
    if (::poll(watched, 2, int(wait_ms)) < 0 && errno != EINTR) {
      spdlog::error("the status endpoint at {} stopped: poll failed: {}", bound_.str(),
                    std::strerror(errno));
      return;
    }
    if (watched[1].revents) return;
    MHD_run(server_);
    deadlines_.shut_overdue();
  }
}

bool StatusServer::defer(MHD_Connection* connection, Page* page) {
  {
    std::lock_guard lock(pages_mutex_);
    if (pages_stopping_ || pages_.size() >= kMaxQueuedPages) return false;
    MHD_suspend_connection(connection);
    pages_.emplace_back(connection, page);
  }
  pages_changed_.notify_one();
  return true;
}

void StatusServer::make_pages() {
  for (;;) {
    std::pair<MHD_Connection*, Page*> next;
    bool stopping = false;
    {
      std::unique_lock lock(pages_mutex_);
      pages_changed_.wait(lock, [&] { return pages_stopping_ || !pages_.empty(); });
      if (pages_.empty()) return;  // stopping, and every page answered
      next = pages_.front();
      pages_.pop_front();
      stopping = pages_stopping_;
    }
    Page& page = *next.second;
    page.reply = stopping ? Reply{MHD_HTTP_SERVICE_UNAVAILABLE, "the daemon is stopping\n"}
                          : route(page.method, page.path);
    page.made.store(true, std::memory_order_release);
    MHD_resume_connection(next.first);  // the loop answers it with the page
  }
}

void StatusServer::stop_making_pages() {
  {
    std::lock_guard lock(pages_mutex_);
    pages_stopping_ = true;
  }
  pages_changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

StatusServer::Reply StatusServer::route(const std::string& method, const std::string& path) const {
  if (method != "GET" && method != "HEAD") {
    return {MHD_HTTP_METHOD_NOT_ALLOWED,
            "method " + method + " is not served: this endpoint serves GET and HEAD of " + kPaths +
                "\n"};
  }
  try {
    if (path == "/") return {200, dashboard_html(), "text/html; charset=utf-8"};
    if (path == "/health") {
      const Health health = handlers_.health();
      return {health.ok ? 200u : 503u, health.ok ? "ok\n" : health.reason + "\n"};
    }
    if (path == "/status") return {200, handlers_.status_json(), "application/json"};
    if (path == "/metrics") {
      return {200, handlers_.metrics_text(), "text/plain; version=0.0.4; charset=utf-8"};
    }
    if (const auto job = traced_job(path)) {
      try {
        return {200, handlers_.job_trace_json(*job), "application/json"};
      } catch (const InvalidArgument& e) {
        return {404, std::string(e.what()) + "\n"};
      }
    }
  } catch (const std::exception& e) {
    return {500, std::string("the status endpoint failed: ") + e.what() + "\n"};
  }
  return {404,
          "no such page: " + method + " " + path + " (this endpoint serves GET " + kPaths + ")\n"};
}

std::string StatusServer::url() const {
  const bool v6 = bound_.host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + bound_.host + "]" : bound_.host) + ":" +
         std::to_string(bound_.port);
}

}  // namespace symmesh
