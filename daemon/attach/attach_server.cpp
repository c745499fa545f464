#include "daemon/attach/attach_server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/errors.h"
#include "common/thread_name.h"
#include "runtime/layout.h"
#include "transport/async_handshake.h"

namespace symmesh {
namespace {

constexpr auto kReapEvery = std::chrono::milliseconds(200);  // processes that went away
constexpr auto kRefusalWrite = std::chrono::milliseconds(200);

std::string prepare_directory(const std::string& directory) {
  std::filesystem::create_directories(directory);
  if (::chmod(directory.c_str(), 0700) != 0) {
    throw InvalidArgument("cannot make " + directory +
                          " private (mode 0700): " + std::strerror(errno));
  }
  const std::string path = directory + "/attach.sock";
  std::filesystem::remove(path);  // a previous daemon's
  return path;
}

// A fresh, zeroed ring in a memfd (the staging area grows after it); the descriptor is the
// caller's. Sealed against shrinking: the process it is passed to cannot pull pages out from
// under the daemon.
attach::Ring* map_ring(int& fd) {
  fd = memfd_create("symmesh-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) throw Error(std::string("memfd_create(ring) failed: ") + std::strerror(errno));
  void* address = MAP_FAILED;
  if (ftruncate(fd, attach::kRingBytes) == 0 &&
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) == 0) {
    address = mmap(nullptr, attach::kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  if (address == MAP_FAILED) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw Error("mapping a request ring failed: " + why);
  }
  auto* ring = static_cast<attach::Ring*>(address);
  ring->magic = attach::kRingMagic;
  ring->version = attach::kAttachProtocolVersion;
  return ring;
}

PeerCredentials credentials_of(int fd) {
  ucred credentials{};
  socklen_t length = sizeof credentials;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    throw PeerError(std::string("cannot read an attaching process's credentials: ") +
                    std::strerror(errno));
  }
  return {int(credentials.pid), unsigned(credentials.uid), unsigned(credentials.gid)};
}

std::string process_name(const PeerCredentials& who) {
  return "pid " + std::to_string(who.pid) + " (uid " + std::to_string(who.uid) + ")";
}

}  // namespace

// Reads one AttachRequest within kAttachHandshakeTimeout, without blocking the thread; gives
// its place back when it ends, however it ends.
class AttachServer::Handshake : public AsyncHandshake {
 public:
  Handshake(AttachServer& server, asio::local::stream_protocol::socket socket, PeerCredentials who)
      : AsyncHandshake(as_generic(server.io_, AF_UNIX, socket.release()),
                       "the attaching process " + process_name(who)),
        server_(server),
        who_(who) {
    server_.take_place(who_);  // here, so that the destructor always gives it back
  }
  ~Handshake() override { server_.give_place(who_); }

 private:
  void begin() override {
    read(request_, attach::kAttachFrameCap, [this] { server_.answer(who_, release(), request_); });
  }

  void ended(const std::string& kind, const std::string& why) override {
    if (kind == "closed") return;  // it left before asking: nothing to answer
    server_.refused_(kind);
    spdlog::warn("attach refused: {}", why);
  }

  AttachServer& server_;
  PeerCredentials who_;
  wire::AttachRequest request_;
};

AttachServer::AttachServer(Node& node, const std::string& directory,
                           std::vector<unsigned> allowed_uids,
                           std::function<void(const std::string&)> refused)
    : node_(node),
      path_(prepare_directory(directory)),
      allowed_uids_(std::move(allowed_uids)),
      refused_(std::move(refused)),
      acceptor_(io_),
      reap_timer_(io_),
      accept_pause_(io_) {
  asio::error_code ec;
  const asio::local::stream_protocol::endpoint at(path_);
  acceptor_.open(at.protocol(), ec);
  if (!ec) acceptor_.bind(at, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw InvalidArgument("cannot listen on " + path_ + ": " + ec.message());
  if (::chmod(path_.c_str(), 0600) != 0) {
    throw InvalidArgument("cannot set the mode of " + path_ + ": " + std::strerror(errno));
  }
  allowed_uids_.push_back(::getuid());
  configure_attached_pes(node.ranks_per_node());
  accept_next();
  reap_every_while();
  thread_ = std::thread([this] {
    set_thread_name("attach server");
    run_io(io_, "the attach socket");
  });
}

AttachServer::~AttachServer() {
  stop();
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

void AttachServer::stop() {
  io_.stop();
  if (thread_.joinable()) thread_.join();
}

void AttachServer::accept_next() {
  acceptor_.async_accept(
      [this](const asio::error_code& ec, asio::local::stream_protocol::socket socket) {
        if (ec == asio::error::operation_aborted) return;
        if (ec) {  // out of descriptors, say: counted, and tried again after a pause
          refused_("bad_request");
          spdlog::warn("attach accept failed: {}", ec.message());
          accept_pause_.expires_after(kAcceptPause);
          return accept_pause_.async_wait([this](const asio::error_code& e) {
            if (!e) accept_next();
          });
        }
        admit(std::move(socket));
        accept_next();
      });
}

void AttachServer::admit(asio::local::stream_protocol::socket socket) {
  const auto refuse = [&](const std::string& kind, const std::string& why) {
    refuse_attach(*BlockingChannel::adopt(socket.release(), "an attaching process"), kind, why);
  };
  try {
    const PeerCredentials who = credentials_of(socket.native_handle());
    if (std::find(allowed_uids_.begin(), allowed_uids_.end(), who.uid) == allowed_uids_.end()) {
      return refuse("auth", "pid " + std::to_string(who.pid) + " runs as uid " +
                                std::to_string(who.uid) +
                                ", which may not attach: only the daemon's uid and those of "
                                "--attach-uid");
    }
    if (!has_place(who)) {
      return refuse("overload", process_name(who) + " has too many attaches in progress: at most " +
                                    std::to_string(kMaxPendingAttachesPerProcess) + " a process, " +
                                    std::to_string(kMaxPendingAttachesPerUid) + " a uid and " +
                                    std::to_string(kMaxPendingAttaches) + " in all; try again");
    }
    std::make_shared<Handshake>(*this, std::move(socket), who)->start(kAttachHandshakeTimeout);
  } catch (const std::exception& e) {
    refused_("bad_request");
    spdlog::warn("attach failed: {}", e.what());
  }
}

bool AttachServer::has_place(const PeerCredentials& who) const {
  const auto count = [](const auto& counts, auto key) {
    const auto it = counts.find(key);
    return it == counts.end() ? size_t{0} : it->second;
  };
  return pending_ < kMaxPendingAttaches &&
         count(pending_by_uid_, who.uid) < kMaxPendingAttachesPerUid &&
         count(pending_by_pid_, who.pid) < kMaxPendingAttachesPerProcess;
}

void AttachServer::take_place(const PeerCredentials& who) {
  ++pending_;
  ++pending_by_uid_[who.uid];
  ++pending_by_pid_[who.pid];
}

void AttachServer::give_place(const PeerCredentials& who) {
  --pending_;
  if (--pending_by_uid_[who.uid] == 0) pending_by_uid_.erase(who.uid);
  if (--pending_by_pid_[who.pid] == 0) pending_by_pid_.erase(who.pid);
}

void AttachServer::reap_every_while() {
  reap_timer_.expires_after(kReapEvery);
  reap_timer_.async_wait([this](const asio::error_code& ec) {
    if (ec) return;
    attached_pes().reap();
    reap_every_while();
  });
}

void AttachServer::refuse_attach(BlockingChannel& channel, const std::string& kind,
                                 const std::string& why) {
  refused_(kind);
  spdlog::warn("attach refused: {}", why);
  wire::AttachReply reply;
  reply.set_protocol_version(attach::kAttachProtocolVersion);
  reply.set_error(why);
  try {
    channel.write(reply, deadline_after(kRefusalWrite));
  } catch (const std::exception&) {
    // It does not read: it is closed anyway.
  }
}

void AttachServer::answer(PeerCredentials who, std::unique_ptr<BlockingChannel> connection,
                          const wire::AttachRequest& request) {
  const Deadline deadline = deadline_after(kAttachHandshakeTimeout);
  wire::AttachReply reply;
  reply.set_protocol_version(attach::kAttachProtocolVersion);
  const auto refuse = [&](BlockingChannel& channel, const std::string& why) {
    refuse_attach(channel, "bad_request", why);
  };
  try {
    if (request.protocol_version() != attach::kAttachProtocolVersion) {
      return refuse(*connection, "attach protocol version mismatch: the daemon speaks " +
                                     std::to_string(attach::kAttachProtocolVersion) +
                                     ", the process " + std::to_string(request.protocol_version()) +
                                     " (use the symmesh library of this daemon's version)");
    }
    // Compared unsigned: a rank past INT_MAX would wrap to a negative int.
    if (request.local_rank() >= uint32_t(node_.ranks_per_node())) {
      return refuse(*connection, "local rank " + std::to_string(request.local_rank()) +
                                     " is outside 0.." +
                                     std::to_string(node_.ranks_per_node() - 1));
    }
    const int local_rank = int(request.local_rank());
    int ring_fd = -1;
    attach::Ring* ring = map_ring(ring_fd);
    BlockingChannel& channel = *connection;
    std::shared_ptr<Attachment> attachment;
    try {
      attachment =
          std::make_shared<Attachment>(local_rank, who, std::move(connection), ring, ring_fd);
    } catch (...) {  // not constructed (no memory): the ring and its descriptor are still ours
      munmap(ring, attach::kRingBytes);
      ::close(ring_fd);
      throw;
    }
    try {
      attached_pes().hold(attachment);
    } catch (const InvalidArgument& e) {
      return refuse(channel, e.what());
    }
    try {
      reply.set_ok(true);
      reply.set_node_rank(node_.rank());
      reply.set_nodes(node_.nodes());
      reply.set_ranks_per_node(node_.ranks_per_node());
      reply.set_segment_bytes(node_.segment().size);
      reply.set_slice_offset(uint64_t(local_rank) * node_.slice_bytes());
      reply.set_slice_bytes(node_.slice_bytes());
      reply.set_heap_start(kReservedBytes);
      reply.set_ring_bytes(attach::kRingBytes);
      channel.write(reply, deadline);
      channel.send_fds({node_.shared_segment().fd(), ring_fd}, deadline);
    } catch (...) {
      attached_pes().release(*attachment);
      throw;
    }
    spdlog::info("pid {} attached as local rank {}", who.pid, local_rank);
  } catch (const std::exception& e) {
    refused_("bad_request");
    spdlog::warn("attach failed: {}", e.what());
  }
}

}  // namespace symmesh
