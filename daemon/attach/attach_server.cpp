#include "daemon/attach/attach_server.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "common/errors.h"
#include "common/thread_name.h"
#include "runtime/layout.h"
#include "wire/attach.pb.h"

namespace symmesh {
namespace {

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

}  // namespace

AttachServer::AttachServer(Node& node, const std::string& directory,
                           std::vector<unsigned> allowed_uids,
                           std::function<void(const std::string&)> refused)
    : node_(node),
      path_(prepare_directory(directory)),
      allowed_uids_(std::move(allowed_uids)),
      refused_(std::move(refused)),
      listener_(std::make_unique<Listener>(LocalPath{path_}, 0600)) {
  allowed_uids_.push_back(::getuid());
  configure_attached_pes(node.ranks_per_node());
  thread_ = std::thread([this] {
    set_thread_name("attach accept");
    accept_loop();
  });
}

AttachServer::~AttachServer() {
  stop();
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

void AttachServer::stop() {
  stopping_.store(true);
  listener_->stop();
  if (thread_.joinable()) thread_.join();
}

void AttachServer::accept_loop() {
  while (!stopping_.load()) {
    // In slices, so processes that went away are reaped while nobody attaches.
    auto connection = listener_->accept(deadline_after(std::chrono::milliseconds(200)));
    attached_pes().reap();
    if (connection) serve(std::move(connection));
  }
}

void AttachServer::serve(std::unique_ptr<BlockingChannel> connection) {
  const Deadline deadline = deadline_after(kAttachHandshakeTimeout);
  wire::AttachReply reply;
  reply.set_protocol_version(attach::kAttachProtocolVersion);
  // Tells the process why (when it still listens) and counts the refusal.
  const auto refuse = [&](BlockingChannel& channel, const std::string& kind,
                          const std::string& why) {
    refused_(kind);
    spdlog::warn("attach refused: {}", why);
    reply.set_error(why);
    try {
      channel.write(reply, deadline);
    } catch (const std::exception&) {
    }
  };
  try {
    const PeerCredentials who = connection->peer_credentials();
    if (std::find(allowed_uids_.begin(), allowed_uids_.end(), who.uid) == allowed_uids_.end()) {
      return refuse(*connection, "auth",
                    "pid " + std::to_string(who.pid) + " runs as uid " + std::to_string(who.uid) +
                        ", which may not attach: only the daemon's uid and those of --attach-uid");
    }
    wire::AttachRequest request;
    connection->read(request, deadline, attach::kAttachFrameCap);
    if (request.protocol_version() != attach::kAttachProtocolVersion) {
      return refuse(*connection, "bad_request",
                    "attach protocol version mismatch: the daemon speaks " +
                        std::to_string(attach::kAttachProtocolVersion) + ", the process " +
                        std::to_string(request.protocol_version()) +
                        " (use the symmesh library of this daemon's version)");
    }
    // Compared unsigned: a rank past INT_MAX would wrap to a negative int.
    if (request.local_rank() >= uint32_t(node_.ranks_per_node())) {
      return refuse(*connection, "bad_request",
                    "local rank " + std::to_string(request.local_rank()) + " is outside 0.." +
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
      return refuse(channel, "bad_request", e.what());
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
