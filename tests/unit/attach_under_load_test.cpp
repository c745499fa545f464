// The attach socket under a hostile or broken local process: stalled connections do not hold
// up a normal attach (handshakes run concurrently, each with its deadline), one process past
// its cap of attaches in progress is refused at once, and a process that writes on its attach
// connection after attaching ends its session with a protocol error naming it, while its PE
// stays its own until it is gone.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <future>
#include <vector>

#include "api/session.h"
#include "common/errors.h"
#include "daemon/attach/attach_server.h"
#include "tests/support/attached_node.h"
#include "wire/attach.pb.h"

namespace symmesh {
namespace {

using AttachUnderLoad = AttachedNode;

// Child processes, each holding `per_child` connections to `path` that never send a byte,
// until the parent closes their pipe (or 60 s pass). Returns once all have connected.
class StalledProcesses {
 public:
  StalledProcesses(const std::string& path, int children, int per_child) {
    int ready[2];
    if (::pipe(hold_) != 0 || ::pipe(ready) != 0) throw Error("pipe failed");
    for (int c = 0; c < children; ++c) {
      const pid_t pid = ::fork();
      if (pid < 0) throw Error("fork failed");
      if (pid == 0) stall(path, per_child, ready[1]);  // never returns
      pids_.push_back(pid);
    }
    ::close(ready[1]);
    ::close(hold_[0]);
    char byte;
    for (int c = 0; c < children; ++c) {
      if (::read(ready[0], &byte, 1) != 1) throw Error("a stalling child failed to connect");
    }
    ::close(ready[0]);
  }
  ~StalledProcesses() {
    ::close(hold_[1]);  // the children's read ends: they exit
    for (const pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  }

 private:
  // In the child: only async-signal-safe calls (the parent has threads).
  [[noreturn]] void stall(const std::string& path, int count, int ready) {
    ::alarm(60);  // bounded even if the parent never lets go
    ::close(hold_[1]);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    for (int i = 0; i < count; ++i) {
      const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        ::_exit(1);
      }
    }
    const char byte = 1;
    if (::write(ready, &byte, 1) != 1) ::_exit(1);
    char ignored;
    [[maybe_unused]] const ssize_t n = ::read(hold_[0], &ignored, 1);
    ::_exit(0);
  }

  int hold_[2] = {-1, -1};
  std::vector<pid_t> pids_;
};

TEST_F(AttachUnderLoad, AHundredStalledConnectionsDoNotHoldUpAnAttach) {
  StalledProcesses stalled(server_.path(), 10, 10);
  const auto start = Clock::now();
  // Its own deadline is short: a server that served one connection at a time would keep it
  // waiting 5 s for each stalled one before it.
  auto session = Session::attach(server_.path(), 0, std::chrono::seconds(3));
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  RecordProperty("attach_us_under_100_stalled", int(ms * 1000));
  std::printf("attach with 100 stalled connections held: %.2f ms\n", ms);
  EXPECT_EQ(session->place().rank, 0);
}

TEST_F(AttachUnderLoad, AProcessPastItsCapOfAttachesInProgressIsRefusedAtOnce) {
  std::vector<std::unique_ptr<BlockingChannel>> stalled;
  for (size_t i = 0; i < kMaxPendingAttachesPerProcess; ++i) {
    stalled.push_back(
        BlockingChannel::connect(LocalPath{server_.path()}, deadline_after(kTimeout)));
  }
  auto one_more = BlockingChannel::connect(LocalPath{server_.path()}, deadline_after(kTimeout));
  wire::AttachReply reply;
  one_more->read(reply, deadline_after(kTimeout));  // refused without asking anything
  EXPECT_FALSE(reply.ok());
  EXPECT_NE(reply.error().find("pid " + std::to_string(getpid())), std::string::npos)
      << reply.error();
  EXPECT_NE(reply.error().find("too many attaches in progress: at most 16 a process"),
            std::string::npos)
      << reply.error();
  // Closed, they give their places back: the process attaches (once the server saw them go).
  stalled.clear();
  std::unique_ptr<Session> session;
  std::string last;
  for (const Deadline until = deadline_after(kTimeout); !session && Clock::now() < until;) {
    try {
      session = attach(0);
    } catch (const InvalidArgument& e) {
      last = e.what();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the server's next pass
    }
  }
  EXPECT_TRUE(session) << last;
}

// Another process's attachment of `local_rank` (its pid is init's: there, and not ours).
std::shared_ptr<Attachment> someone_elses(int local_rank, int& peer_end) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, pair) != 0) throw Error("socketpair failed");
  peer_end = pair[1];
  const int ring_fd = memfd_create("test-ring", MFD_CLOEXEC);
  if (ring_fd < 0 || ftruncate(ring_fd, attach::kRingBytes) != 0) throw Error("memfd failed");
  void* ring = mmap(nullptr, attach::kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, ring_fd, 0);
  if (ring == MAP_FAILED) throw Error("mmap failed");
  return std::make_shared<Attachment>(local_rank, PeerCredentials{1, ::getuid(), ::getgid()},
                                      BlockingChannel::adopt(pair[0], "another process"),
                                      static_cast<attach::Ring*>(ring), ring_fd);
}

TEST_F(AttachUnderLoad, BytesAfterTheHandshakeAreAProtocolErrorAndThePeStaysTheProcesss) {
  auto pes = start_session();
  auto survivor = survivor_in_barrier(1);
  RawAttach raw = attach_by_hand(0);
  ASSERT_EQ(raw.fds.size(), 2u);
  raw.connection->write_raw("x", deadline_after(kTimeout));  // where nothing is read
  ASSERT_EQ(pes[0].wait_for(kTimeout), std::future_status::ready);
  const std::string why = pes[0].get();
  EXPECT_NE(why.find("(pid " + std::to_string(getpid()) + ") wrote on its attach connection"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("a protocol error"), std::string::npos) << why;
  ASSERT_EQ(survivor.wait_for(kTimeout), std::future_status::ready);
  EXPECT_NE(survivor.get().find("the session ended"), std::string::npos);
  ASSERT_EQ(pes[1].wait_for(kTimeout), std::future_status::ready);
  pes[1].get();
  // Its process is still there, mapping the PE's memory: the PE stays its own.
  EXPECT_EQ(attached_pes().holders()[0], getpid());
  int peer_end = -1;
  try {
    attached_pes().hold(someone_elses(0, peer_end));
    ADD_FAILURE() << "another process took a PE whose process is still there";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("held by pid " + std::to_string(getpid()) +
                                         " (its session ended"),
              std::string::npos)
        << e.what();
  }
  ::close(peer_end);
  // Gone (its connection closed), it frees the PE.
  raw.connection.reset();
  for (const int fd : raw.fds) ::close(fd);
  const Deadline until = deadline_after(kTimeout);
  while (attached_pes().holders()[0] != 0 && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the reaper's next pass
  }
  EXPECT_EQ(attached_pes().holders()[0], 0);
  node_.doorbell().clear_abort();
}

}  // namespace
}  // namespace symmesh
