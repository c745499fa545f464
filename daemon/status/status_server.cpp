#include "daemon/status/status_server.h"

#include <httplib.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <chrono>

#include "common/errors.h"
#include "common/thread_name.h"
#include "daemon/status/dashboard_page.h"
#include "transport/wait.h"

namespace symmesh {
namespace {

constexpr size_t kWorkers = 4;
constexpr auto kIdleLimit = std::chrono::seconds(1);
constexpr const char* kPaths =
    "/ (the dashboard), /health, /status, /metrics, /jobs/ID/trace (at the root)";

}  // namespace

StatusServer::StatusServer(const HostPort& address, Handlers handlers)
    : handlers_(std::move(handlers)), server_(std::make_unique<httplib::Server>()) {
  httplib::Server& s = *server_;
  // A status page is small and polled: a few worker threads, whatever the core count. Each
  // serves one connection at a time, so an idle or slow client may hold one for at most the
  // read timeout (or the keep-alive timeout between requests): short, so /health stays quick
  // however many idle connections are open.
  s.new_task_queue = [] { return new httplib::ThreadPool(kWorkers); };
  s.set_read_timeout(kIdleLimit);
  s.set_keep_alive_timeout(std::chrono::duration_cast<std::chrono::seconds>(kIdleLimit).count());
  s.set_write_timeout(std::chrono::seconds(5));
  s.set_payload_max_length(4096);  // GET only: no request needs a body
  // httplib's default is SO_REUSEPORT, with which a second daemon would silently share the
  // port: only SO_REUSEADDR (a restart may bind over TIME_WAIT), so a port in use fails.
  s.set_socket_options([](int sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(dashboard_html(), "text/html; charset=utf-8");
  });
  s.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const Health health = handlers_.health();
    res.status = health.ok ? 200 : 503;
    res.set_content(health.ok ? "ok\n" : health.reason + "\n", "text/plain; charset=utf-8");
  });
  s.Get("/status", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(handlers_.status_json(), "application/json");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(handlers_.metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  s.Get(R"(/jobs/(\d{1,19})/trace)", [this](const httplib::Request& req, httplib::Response& res) {
    try {
      res.set_content(handlers_.job_trace_json(std::stoull(req.matches[1].str())),
                      "application/json");
    } catch (const std::exception& e) {
      res.status = 404;
      res.set_content(std::string(e.what()) + "\n", "text/plain; charset=utf-8");
    }
  });
  s.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (res.status != 404 || !res.body.empty()) return;  // a 404 that already says why
    res.set_content("no such page: " + req.method + " " + req.path + " (this endpoint serves GET " +
                        kPaths + ")\n",
                    "text/plain; charset=utf-8");
  });
  bound_ = address;
  const bool bound = address.port == 0
                         ? (bound_.port = uint16_t(s.bind_to_any_port(address.host))) > 0
                         : s.bind_to_port(address.host, address.port);
  if (!bound) {
    throw InvalidArgument("cannot bind the status endpoint to " + address.str() +
                          " (in use, or not an address of this host); set --status-addr "
                          "HOST:PORT, or off");
  }
  // Bound is listening: connections wait in the backlog until the accept loop starts.
  thread_ = std::thread([this] {
    set_thread_name("status http");
    // A stop returns true; false is the accept loop failing (its socket is then closed).
    if (!server_->listen_after_bind()) {
      spdlog::error(
          "the status endpoint at {} stopped accepting: /health, /status and /metrics "
          "are down",
          bound_.str());
    }
    ended_.store(true);
  });
}

StatusServer::~StatusServer() {
  // cpp-httplib 0.11's stop() acts only once listen_internal() has set is_running_: a daemon
  // that failed right after starting stopped a loop that had not begun, which then accepted
  // for ever. So wait (bounded) for the loop to run, or to have ended, before stopping it.
  const Deadline deadline = deadline_after(std::chrono::seconds(10));
  while (!server_->is_running() && !ended_.load() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));  // polling the loop's start
  }
  if (!server_->is_running() && !ended_.load()) {
    spdlog::warn(
        "the status endpoint's accept loop had not started after 10 s: stopping it may "
        "hang");
  }
  server_->stop();
  if (thread_.joinable()) thread_.join();
}

std::string StatusServer::url() const {
  const bool v6 = bound_.host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + bound_.host + "]" : bound_.host) + ":" +
         std::to_string(bound_.port);
}

}  // namespace symmesh
