// symmeshd: the symmesh node daemon.
#include <signal.h>
#include <spdlog/spdlog.h>

#include <thread>

#include "common/descriptor_limit.h"
#include "daemon/config.h"
#include "daemon/daemon.h"

int main(int argc, char** argv) {
  std::optional<symmesh::DaemonConfig> config;
  try {
    config = symmesh::parse_daemon_config(argc, argv);
  } catch (const std::exception& e) {
    fprintf(stderr, "symmeshd: %s\n", e.what());
    return 2;
  }
  if (!config) return 0;  // --help
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [node " + std::to_string(config->node_rank) +
                      "] [%l] %v");

  // SIGTERM and SIGINT are taken by one thread (sigwait), never by a worker.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Every held connection (status, control, attach) is a descriptor: take what the host allows.
  const uint64_t descriptors = symmesh::raise_descriptor_limit();
  if (descriptors < 4096) {
    spdlog::warn("open-file limit {}: a flood of connections may exhaust it (raise ulimit -Hn)",
                 descriptors);
  }

  symmesh::Daemon daemon(*config);
  std::thread signal_thread([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    daemon.request_stop(signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  });
  signal_thread.detach();
  try {
    return daemon.run();
  } catch (const std::exception& e) {
    spdlog::error("symmeshd: {}", e.what());
    return 1;
  }
}
