#include "client/launch.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <iostream>
#include <optional>

#include "common/errors.h"
#include "wire/enum_text.h"

extern char** environ;

namespace symmesh {
namespace {

int signal_pipe[2] = {-1, -1};

void on_signal(int number) {
  const char byte = char(number);
  [[maybe_unused]] const ssize_t ignored = ::write(signal_pipe[1], &byte, 1);
}

// One output stream of a child: bytes in, whole lines out with the rank in front.
struct Stream {
  int fd = -1;
  int to = STDOUT_FILENO;
  std::string pending;
};

struct Child {
  pid_t pid = 0;
  int rank = 0;
  int local_rank = 0;
  Stream out, err;
  std::optional<int> exit_code;
};

void write_all(int fd, const std::string& text) {
  for (size_t at = 0; at < text.size();) {
    const ssize_t n = ::write(fd, text.data() + at, text.size() - at);
    if (n <= 0 && errno != EINTR) return;  // the terminal is gone: drop the output
    if (n > 0) at += size_t(n);
  }
}

// Reads what is there; passes on every complete line (the rest at end of stream).
bool drain(Stream& stream, const std::string& prefix) {
  char buffer[4096];
  const ssize_t n = ::read(stream.fd, buffer, sizeof buffer);
  if (n > 0) stream.pending.append(buffer, size_t(n));
  for (size_t end; (end = stream.pending.find('\n')) != std::string::npos;) {
    write_all(stream.to, prefix + stream.pending.substr(0, end + 1));
    stream.pending.erase(0, end + 1);
  }
  if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR))) return true;
  if (!stream.pending.empty()) write_all(stream.to, prefix + stream.pending + "\n");
  ::close(stream.fd);
  stream.fd = -1;
  return false;
}

std::vector<std::string> child_environment(const wire::StatusReply& status, int local_rank) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry; ++entry) {
    if (std::strncmp(*entry, "SYMMESH_", 8) != 0) env.emplace_back(*entry);
  }
  const int local_size = int(status.ranks_per_node());
  const auto set = [&](const char* name, const std::string& value) {
    env.push_back(std::string(name) + "=" + value);
  };
  set("SYMMESH_RANK", std::to_string(int(status.node_rank()) * local_size + local_rank));
  set("SYMMESH_WORLD_SIZE", std::to_string(int(status.nodes()) * local_size));
  set("SYMMESH_LOCAL_RANK", std::to_string(local_rank));
  set("SYMMESH_LOCAL_SIZE", std::to_string(local_size));
  set("SYMMESH_NODE_RANK", std::to_string(status.node_rank()));
  set("SYMMESH_ATTACH_SOCKET", status.attach_socket());
  return env;
}

Child spawn(const std::vector<std::string>& command, const wire::StatusReply& status, int local) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw Error(std::string("pipe failed: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  std::vector<std::string> env = child_environment(status, local);
  std::vector<char*> argv, envp;
  for (const auto& arg : command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  for (auto& entry : env) envp.push_back(entry.data());
  envp.push_back(nullptr);
  Child child;
  child.rank = int(status.node_rank() * status.ranks_per_node()) + local;
  child.local_rank = local;
  const int failed = posix_spawnp(&child.pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  ::close(err[1]);
  if (failed) {
    ::close(out[0]);
    ::close(err[0]);
    throw InvalidArgument("cannot start '" + command[0] + "': " + std::strerror(failed));
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  child.out = {out[0], STDOUT_FILENO, ""};
  child.err = {err[0], STDERR_FILENO, ""};
  return child;
}

void signal_all(std::vector<Child>& children, int number) {
  for (const Child& child : children) {
    if (!child.exit_code) ::kill(child.pid, number);
  }
}

// A CLI context whose deadlines start now (launch outlives the ones it started with).
CliContext fresh(const CliContext& context) {
  CliContext now = context;
  now.deadline = deadline_after(std::chrono::seconds(30));
  now.connect_deadline = deadline_after(std::chrono::seconds(10));
  return now;
}

// A process failed: the session it was in cannot go on, so end it on every node now rather
// than let the other PEs wait out their deadlines for it.
void cancel_session(const CliContext& context) {
  try {
    const CliContext now = fresh(context);
    wire::StatusReply root;
    auto client = now.connect_to_root(root);
    for (const auto& job : root.jobs()) {
      if (job.kind() == wire::JOB_KIND_SESSION &&
          (job.state() == wire::JOB_STATE_RUNNING || job.state() == wire::JOB_STATE_QUEUED)) {
        client->cancel(job.job_id(), now.deadline);
        std::cerr << "symmesh launch: cancelled session job " << job.job_id() << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "symmesh launch: could not cancel the session: " << e.what() << "\n";
  }
}

// Why the session these processes serve failed ("" while none did): a session job that ended
// in error or was cancelled after launch started. A session can end with no process of this
// node failing (another node's died, or it was cancelled before it ran), and its processes
// would wait for calls nobody serves.
std::string session_failed(const CliContext& context, double since_unix_s) {
  try {
    const CliContext now = fresh(context);
    wire::StatusReply root;
    now.connect_to_root(root);
    for (const auto& job : root.jobs()) {
      if (job.kind() != wire::JOB_KIND_SESSION || job.finished_unix_s() < since_unix_s) continue;
      if (job.state() != wire::JOB_STATE_ERROR && job.state() != wire::JOB_STATE_CANCELLED)
        continue;
      return "session job " + std::to_string(job.job_id()) + " ended (" +
             wire::enum_text(job.state()) + ": " + job.result().error() + ")";
    }
  } catch (const std::exception&) {
    // The root is unreachable now: the processes' own calls will say so.
  }
  return "";
}

// How many processes this node's PE `local_rank` took up, as `status` counts them; nullopt
// from a daemon that does not count them.
std::optional<uint64_t> processes_taken(const wire::StatusReply& status, int local_rank) {
  if (local_rank >= status.processes_taken_size()) return std::nullopt;
  return status.processes_taken(local_rank);
}

// Whether a session took up a process on PE `local_rank` since `before` (this node's daemon's
// status then). Where that cannot be told (the daemon is unreachable or does not count), it
// answers yes: the session's own outcome will tell.
bool session_took_up(const CliContext& context, const wire::StatusReply& before, int local_rank) {
  try {
    const CliContext now = fresh(context);
    const wire::StatusReply after = now.connect(now.daemon)->status(now.deadline);
    const auto then = processes_taken(before, local_rank);
    const auto since = processes_taken(after, local_rank);
    return !then || !since || *since > *then;
  } catch (const std::exception&) {
    return true;
  }
}

// What supervise asks about the session its children serve.
struct SessionWatch {
  std::function<void()> cancel;                 // a process failed: end the session everywhere
  std::function<std::string()> ended;           // why the session ended ("" while it runs)
  std::function<bool(int local_rank)> took_up;  // whether the session took up that PE's process
};

// Why `child`'s exit fails the launch ("" when it does not). An exit before the session took
// up the process fails it whatever the status: the PE would wait out --attach-timeout for it.
std::string exit_failure(const Child& child, const SessionWatch& watch) {
  const std::string rank = "rank " + std::to_string(child.rank);
  const std::string code = std::to_string(*child.exit_code);
  if (!watch.took_up(child.local_rank)) {
    return rank + " exited with status " + code + " before attaching to its PE: ending the session";
  }
  return *child.exit_code == 0 ? ""
                               : rank + " exited with status " + code + "; stopping the others";
}

// Runs the children to their ends; returns launch's exit code. `watch.ended()` is asked every
// kSessionCheck for why the session ended ("" while it runs).
int supervise(std::vector<Child>& children, const SessionWatch& watch) {
  Deadline next_check = deadline_after(kSessionCheck);
  std::optional<int> first_failure;
  Deadline kill_at = Deadline::max();  // SIGKILL what still runs then
  for (;;) {
    std::vector<pollfd> watched{{signal_pipe[0], POLLIN, 0}};
    std::vector<std::pair<Stream*, int>> streams;
    for (Child& child : children) {
      for (Stream* stream : {&child.out, &child.err}) {
        if (stream->fd < 0) continue;
        watched.push_back({stream->fd, POLLIN, 0});
        streams.emplace_back(stream, child.rank);
      }
    }
    ::poll(watched.data(), watched.size(), 100);  // also a tick for exits and the kill deadline
    if (watched[0].revents & POLLIN) {
      char number = 0;
      while (::read(signal_pipe[0], &number, 1) == 1) signal_all(children, number);
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      if (watched[i + 1].revents)
        drain(*streams[i].first, "[rank " + std::to_string(streams[i].second) + "] ");
    }
    bool running = false;
    for (Child& child : children) {
      int status = 0;
      if (!child.exit_code && ::waitpid(child.pid, &status, WNOHANG) == child.pid) {
        child.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        const std::string why = first_failure ? "" : exit_failure(child, watch);
        if (!why.empty()) {
          first_failure = *child.exit_code != 0 ? *child.exit_code : 1;
          std::cerr << "symmesh launch: " << why << "\n";
          signal_all(children, SIGTERM);
          kill_at = deadline_after(kStopGrace);
          watch.cancel();
        }
      }
      running = running || !child.exit_code || child.out.fd >= 0 || child.err.fd >= 0;
    }
    if (!running) return first_failure.value_or(0);
    if (!first_failure && Clock::now() >= next_check) {
      next_check = deadline_after(kSessionCheck);
      if (const std::string why = watch.ended(); !why.empty()) {
        std::cerr << "symmesh launch: " << why << "; stopping the processes\n";
        first_failure = 1;
        signal_all(children, SIGTERM);
        kill_at = deadline_after(kStopGrace);
      }
    }
    if (Clock::now() >= kill_at) {
      signal_all(children, SIGKILL);
      kill_at = Deadline::max();
    }
  }
}

}  // namespace

int launch(const CliContext& context, const std::vector<std::string>& command,
           uint32_t attach_timeout_s) {
  if (command.empty()) throw InvalidArgument("launch needs a command: symmesh launch -- CMD ARGS");
  auto client = context.connect(context.daemon);
  const wire::StatusReply status = client->status(context.connect_deadline);
  if (status.attach_socket().empty()) {
    throw PeerError("the daemon at " + context.daemon.str() + " takes no attached processes");
  }
  const double started =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  uint64_t session = 0;
  if (status.node_rank() == 0) {
    wire::JobSpec spec;
    spec.mutable_session()->set_attach_timeout_s(attach_timeout_s);
    session = client->submit_detached(spec, context.deadline);
    std::cerr << "symmesh launch: session job " << session << " on " << status.nodes()
              << " nodes x " << status.ranks_per_node() << " PEs\n";
  }
  if (pipe2(signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(std::string("pipe failed: ") + std::strerror(errno));
  }
  struct sigaction action {};
  action.sa_handler = on_signal;
  for (const int number : {SIGINT, SIGTERM, SIGHUP}) sigaction(number, &action, nullptr);
  std::vector<Child> children;
  try {
    for (int local = 0; local < int(status.ranks_per_node()); ++local) {
      children.push_back(spawn(command, status, local));
    }
  } catch (...) {
    signal_all(children, SIGKILL);
    supervise(children, {[] {}, [] { return std::string(); }, [](int) { return true; }});
    throw;
  }
  const int code = supervise(
      children, {[&] { cancel_session(context); }, [&] { return session_failed(context, started); },
                 [&](int local_rank) { return session_took_up(context, status, local_rank); }});
  if (session) {
    // The session's own outcome names a PE that failed when the processes could not.
    const CliContext now = fresh(context);
    const wire::JobResult result = now.connect(now.daemon)
                                       ->wait(
                                           session, [](const wire::JobEvent&) {}, context.deadline);
    if (!result.ok())
      std::cerr << "symmesh launch: session job " << session << ": " << result.error() << "\n";
    if (code == 0 && !result.ok()) return 1;
  }
  return code;
}

}  // namespace symmesh
