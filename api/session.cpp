#include "api/session.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "common/errors.h"
#include "transport/wait.h"
#include "wire/attach.pb.h"
#include "wire/enum_text.h"

namespace symmesh {
namespace {

void* map_shared(int fd, size_t bytes, const char* what) {
  void* address = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (address == MAP_FAILED) {
    throw Error(std::string("mapping the ") + what + " failed: " + std::strerror(errno));
  }
  return address;
}

size_t element_bytes(wire::DataType dtype) {
  wire::check_enum(dtype, "dtype");
  return dtype == wire::DATA_TYPE_F32 ? 4 : 2;
}

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) {
    throw InvalidArgument(std::string(name) +
                          " is not set: start the process with symmesh launch, or attach with "
                          "an explicit socket and local rank");
  }
  return value;
}

}  // namespace

std::unique_ptr<Session> Session::attach(const std::string& socket_path, int local_rank,
                                         std::chrono::milliseconds timeout) {
  const Deadline deadline = deadline_after(timeout);
  std::unique_ptr<Session> session(new Session());
  session->connection_ = BlockingChannel::connect(LocalPath{socket_path}, deadline);
  wire::AttachRequest request;
  request.set_protocol_version(attach::kAttachProtocolVersion);
  request.set_local_rank(uint32_t(local_rank));
  session->connection_->write(request, deadline);
  wire::AttachReply reply;
  session->connection_->read(reply, deadline, attach::kAttachFrameCap);
  if (!reply.ok()) throw InvalidArgument("attaching to " + socket_path + ": " + reply.error());
  if (reply.ring_bytes() != attach::kRingBytes || reply.slice_offset() > reply.segment_bytes() ||
      reply.slice_bytes() > reply.segment_bytes() - reply.slice_offset()) {
    throw PeerError("attaching to " + socket_path +
                    ": the daemon's layout does not match this "
                    "library's (use the symmesh library of the daemon's version)");
  }
  const std::vector<int> fds = session->connection_->receive_fds(2, deadline);
  if (fds.size() != 2) {
    for (const int fd : fds) ::close(fd);
    throw PeerError("attaching to " + socket_path + ": the daemon passed " +
                    std::to_string(fds.size()) + " descriptors, not 2");
  }
  session->segment_bytes_ = reply.segment_bytes();
  session->segment_ = static_cast<std::byte*>(map_shared(fds[0], reply.segment_bytes(), "heap"));
  session->slice_ = session->segment_ + reply.slice_offset();
  session->slice_bytes_ = reply.slice_bytes();
  session->ring_ = static_cast<attach::Ring*>(map_shared(fds[1], attach::kRingBytes, "ring"));
  SessionPlace& place = session->place_;
  place.local_rank = local_rank;
  place.local_size = int(reply.ranks_per_node());
  place.node_rank = int(reply.node_rank());
  place.world_size = int(reply.nodes() * reply.ranks_per_node());
  place.rank = place.node_rank * place.local_size + local_rank;
  return session;
}

std::unique_ptr<Session> Session::attach_from_environment() {
  const std::string rank = environment("SYMMESH_LOCAL_RANK");
  char* end = nullptr;
  const long local_rank = std::strtol(rank.c_str(), &end, 10);
  if (*end != '\0' || local_rank < 0) {
    throw InvalidArgument("SYMMESH_LOCAL_RANK '" + rank + "' is not a local rank (0, 1, ...)");
  }
  return attach(environment("SYMMESH_ATTACH_SOCKET"), int(local_rank), std::chrono::seconds(30));
}

Session::~Session() {
  if (ring_ && !detached_) {
    try {
      call(attach::Request{.op = attach::Op::kDetach});
    } catch (const std::exception&) {
      // The daemon is gone or the session ended: closing the connection says the rest.
    }
  }
  if (ring_) munmap(ring_, attach::kRingBytes);
  if (segment_) munmap(segment_, segment_bytes_);
}

bool Session::on_heap(const void* address, size_t bytes) const {
  const auto* byte = static_cast<const std::byte*>(address);
  return byte >= slice_ && byte <= slice_ + slice_bytes_ &&
         bytes <= size_t(slice_ + slice_bytes_ - byte);
}

uint64_t Session::offset_of(const void* address, size_t bytes, const char* what) const {
  if (!on_heap(address, bytes)) {
    throw InvalidArgument(std::string(what) +
                          " is not on this PE's symmetric heap (allocate it "
                          "with Session::malloc)");
  }
  return uint64_t(static_cast<const std::byte*>(address) - slice_);
}

std::string Session::closed_reason() const {
  return std::string(ring_->closed_reason, strnlen(ring_->closed_reason, attach::kMessageBytes));
}

uint64_t Session::call(const attach::Request& request) {
  if (detached_) throw InvalidArgument("the session is detached");
  if (ring_->closed.load(std::memory_order_acquire)) {
    throw PeerError("the session ended: " + closed_reason());
  }
  const uint32_t ticket = ring_->submitted.load(std::memory_order_relaxed);
  attach::Slot& slot = ring_->slots[ticket % attach::kRingSlots];
  slot.request = request;
  ring_->submitted.store(ticket + 1, std::memory_order_release);
  wake_shared(ring_->submitted);
  if (request.op == attach::Op::kDetach && !ring_->serving.load(std::memory_order_acquire)) {
    detached_ = true;  // nobody serves this PE: the detach waits in the ring for whoever would
    return 0;
  }
  const Deadline deadline = deadline_after(call_timeout_);
  wait_for_change(ring_->completed, ticket, [&] {
    if (ring_->closed.load(std::memory_order_acquire)) {
      throw PeerError("the session ended: " + closed_reason());
    }
    if (connection_->closed_by_peer()) throw PeerError("the daemon closed the attach connection");
    if (Clock::now() >= deadline) {
      throw TimeoutError("no answer from the daemon within " +
                         std::to_string(call_timeout_.count() / 1000) +
                         " s (is a session running? symmesh launch starts one)");
    }
  });
  if (request.op == attach::Op::kDetach) detached_ = true;
  const attach::Completion& completion = slot.completion;
  const std::string message(completion.message, strnlen(completion.message, attach::kMessageBytes));
  if (completion.status == attach::Status::kInvalid) throw InvalidArgument(message);
  // A call that failed ends the session on every PE (see the session job).
  if (completion.status != attach::Status::kOk) throw PeerError("the session ended: " + message);
  return completion.value;
}

void* Session::malloc(size_t bytes) {
  return slice_ + call(attach::Request{.op = attach::Op::kMalloc, .count = bytes});
}

void Session::free(void* address) {
  if (address) call(attach::Request{.op = attach::Op::kFree, .dst = offset_of(address, 0, "free")});
}

void Session::barrier() {
  call(attach::Request{.op = attach::Op::kBarrier});
}

void Session::ping() {
  call(attach::Request{.op = attach::Op::kEmpty});
}

void Session::all_reduce(void* data, size_t count, wire::DataType dtype, wire::Reduction op) {
  const uint64_t at = offset_of(data, count * element_bytes(dtype), "all_reduce's tensor");
  call(attach::Request{.op = attach::Op::kAllReduce,
                       .dtype = uint32_t(dtype),
                       .reduce = uint32_t(op),
                       .src = at,
                       .dst = at,
                       .count = count});
}

void Session::reduce_scatter(void* dst, const void* src, size_t count, wire::DataType dtype,
                             wire::Reduction op) {
  const size_t n = size_t(place_.world_size), e = element_bytes(dtype);
  const size_t mine = count * (place_.rank + 1) / n - count * place_.rank / n;
  call(attach::Request{.op = attach::Op::kReduceScatter,
                       .dtype = uint32_t(dtype),
                       .reduce = uint32_t(op),
                       .src = offset_of(src, count * e, "reduce_scatter's input"),
                       .dst = offset_of(dst, mine * e, "reduce_scatter's output"),
                       .count = count});
}

void Session::all_gather(void* dst, const void* src, size_t count, wire::DataType dtype) {
  const size_t e = element_bytes(dtype);
  call(attach::Request{.op = attach::Op::kAllGather,
                       .dtype = uint32_t(dtype),
                       .src = offset_of(src, count * e, "all_gather's input"),
                       .dst = offset_of(dst, count * place_.world_size * e, "all_gather's output"),
                       .count = count});
}

void Session::all_to_all(void* dst, const void* src, size_t count, wire::DataType dtype) {
  const size_t bytes = count * place_.world_size * element_bytes(dtype);
  call(attach::Request{.op = attach::Op::kAllToAll,
                       .dtype = uint32_t(dtype),
                       .src = offset_of(src, bytes, "all_to_all's input"),
                       .dst = offset_of(dst, bytes, "all_to_all's output"),
                       .count = count});
}

}  // namespace symmesh
