#include "api/session.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "api/fused_call_mode.h"
#include "api/op_limits.h"
#include "api/staging_layout.h"
#include "api/tensor_overlap.h"
#include "api/topk_check.h"
#include "common/errors.h"
#include "common/streaming_copy.h"
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

void check_moe_width(const char* call, int64_t hidden) {
  if (hidden >= kMoeHiddenMultiple && hidden <= kMaxMoeHidden && hidden % kMoeHiddenMultiple == 0) {
    return;
  }
  throw InvalidArgument(std::string(call) + ": rows of " + std::to_string(hidden) +
                        " elements; allowed a multiple of " + std::to_string(kMoeHiddenMultiple) +
                        " from " + std::to_string(kMoeHiddenMultiple) + " to " +
                        std::to_string(kMaxMoeHidden));
}

// A dispatch that leaves nodes out, checked before it is sent (a call the daemon refuses ends
// the session): the mask names this cluster's nodes, this process's among them, and no token
// goes to an expert on a node left out.
void check_active_nodes(uint64_t active, const SessionPlace& place, const int64_t* topk_idx,
                        int64_t tokens, int topk, int experts) {
  if (active == 0) return;
  const int nodes = place.world_size / place.local_size;
  if (nodes > 64 || (nodes < 64 && active >> nodes != 0) || !(active >> place.node_rank & 1)) {
    throw InvalidArgument("dispatch: the active nodes (mask " + std::to_string(active) +
                          ") must be some of the cluster's " + std::to_string(nodes) +
                          " (at most 64), this process's node " + std::to_string(place.node_rank) +
                          " among them: the processes of a node left out do not call");
  }
  const int per_pe = experts / place.world_size;
  for (int64_t slot = 0; slot < tokens * topk; ++slot) {
    if (topk_idx[slot] < 0) continue;
    const int node = int(topk_idx[slot] / per_pe) / place.local_size;
    if (active >> node & 1) continue;
    throw InvalidArgument("dispatch: token " + std::to_string(slot / topk) + " goes to expert " +
                          std::to_string(topk_idx[slot]) + " on node " + std::to_string(node) +
                          ", which the active nodes leave out: mask the routing first (-1)");
  }
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
      reply.slice_bytes() > reply.segment_bytes() - reply.slice_offset() ||
      reply.heap_start() > reply.slice_bytes()) {
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
  session->heap_start_ = reply.heap_start();
  // The ring's memfd stays open: the staging area after the ring is mapped from it as it grows.
  session->staging_ = std::make_shared<attach::StagingArea>(fds[1]);
  session->loans_ = std::make_shared<StagingLoans>(session->staging_);
  session->ring_ = static_cast<attach::Ring*>(map_shared(dup(fds[1]), attach::kRingBytes, "ring"));
  SessionPlace& place = session->place_;
  place.local_rank = local_rank;
  place.local_size = int(reply.ranks_per_node());
  place.node_rank = int(reply.node_rank());
  place.world_size = int(reply.nodes() * reply.ranks_per_node());
  place.rank = place.node_rank * place.local_size + local_rank;
  return session;
}

std::unique_ptr<Session> Session::attach_from_environment(std::chrono::milliseconds timeout) {
  const std::string rank = environment("SYMMESH_LOCAL_RANK");
  char* end = nullptr;
  const long local_rank = std::strtol(rank.c_str(), &end, 10);
  if (*end != '\0' || local_rank < 0) {
    throw InvalidArgument("SYMMESH_LOCAL_RANK '" + rank + "' is not a local rank (0, 1, ...)");
  }
  return attach(environment("SYMMESH_ATTACH_SOCKET"), int(local_rank), timeout);
}

Session::~Session() {
  detach();
  if (ring_) munmap(ring_, attach::kRingBytes);
  if (segment_) munmap(segment_, segment_bytes_);
}

void Session::detach() {
  if (!ring_ || detached_) return;
  try {
    call(attach::Request{.op = attach::Op::kDetach});  // refused under the lock once detached
  } catch (const InvalidArgument&) {
    // Another thread detached first.
  } catch (const std::exception&) {
    // The daemon is gone, the session ended, or an earlier call timed out: the closed
    // connection tells the daemon this process is done with its PE.
    const std::lock_guard lock(call_mutex_);
    detached_ = true;
    connection_->close();
  }
}

bool Session::on_heap(const void* address, size_t bytes) const {
  const auto* byte = static_cast<const std::byte*>(address);
  return byte >= slice_ + heap_start_ && byte <= slice_ + slice_bytes_ &&
         bytes <= size_t(slice_ + slice_bytes_ - byte);
}

std::optional<uint64_t> Session::heap_place(const void* data, size_t bytes, size_t element) const {
  if (bytes == 0 || !on_heap(data, bytes)) return std::nullopt;
  const uint64_t offset = uint64_t(static_cast<const std::byte*>(data) - slice_);
  if (offset % element != 0) return std::nullopt;
  return offset;
}

void Session::place_input(attach::Request& request, const void* data, size_t bytes,
                          std::byte* staged, size_t element) const {
  if (const auto offset = heap_place(data, bytes, element)) {
    request.src = *offset;
    request.input_place = attach::Place::kHeap;
    return;
  }
  request.input_place = attach::Place::kStaging;
  bulk_copy(staged, data, bytes);
}

void Session::place_output(attach::Request& request, uint64_t rows_bytes, const void* out,
                           size_t bytes, size_t element, const char* caller) const {
  const auto offset = heap_place(out, bytes, element);
  request.output_place = offset ? attach::Place::kHeap : attach::Place::kStaging;
  request.dst = offset.value_or(0);
  attach::check_apart(request, rows_bytes, bytes, caller, "expert rows", "out");
}

std::shared_ptr<StagingLoan> Session::call_into(const attach::Request& request, void* out,
                                                size_t bytes, uint64_t in_bytes) {
  call(request);
  if (request.output_place != attach::Place::kStaging) return nullptr;
  const uint64_t staged = attach::staged_outputs_at(request, in_bytes, bytes);
  if (!out) return loans_->lend(staged, bytes);
  bulk_copy(out, staging_->range(staged, bytes, "combine's output"), bytes);
  return nullptr;
}

uint64_t Session::offset_of(const void* address, size_t bytes, const char* what,
                            size_t element) const {
  if (!on_heap(address, bytes)) {
    throw InvalidArgument(std::string(what) +
                          " is not on this PE's symmetric heap (allocate it "
                          "with Session::malloc)");
  }
  const uint64_t offset = uint64_t(static_cast<const std::byte*>(address) - slice_);
  if (offset % element != 0) {
    throw InvalidArgument(std::string(what) + " (heap offset " + std::to_string(offset) +
                          ") must be aligned to the " + std::to_string(element) + "-byte element");
  }
  return offset;
}

std::string Session::closed_reason() const {
  return std::string(ring_->closed_reason, strnlen(ring_->closed_reason, attach::kMessageBytes));
}

uint64_t Session::call(const attach::Request& request, uint64_t* value2) {
  const std::lock_guard lock(call_mutex_);
  std::vector<uint64_t> releases;
  {
    const std::lock_guard queued(releases_mutex_);
    releases.swap(pending_releases_);
  }
  for (const uint64_t handle : releases) {
    call_locked(attach::Request{.op = attach::Op::kReleaseHandle, .args = {handle}}, nullptr);
  }
  return call_locked(request, value2);
}

void Session::queue_release(uint64_t handle) {
  const std::lock_guard queued(releases_mutex_);
  pending_releases_.push_back(handle);
  low_latency_halves_.free(handle);
}

uint64_t Session::call_locked(const attach::Request& request, uint64_t* value2) {
  if (detached_) throw InvalidArgument("the session is detached");
  if (timed_out_) {
    throw PeerError(
        "a call timed out, so the session's answers can no longer be matched to "
        "its calls: attach again");
  }
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
      timed_out_ = true;
      throw TimeoutError("no answer from the daemon within " +
                         std::to_string(call_timeout_.count() / 1000) +
                         " s (is a session running? symmesh launch starts one)");
    }
  });
  if (request.op == attach::Op::kDetach) detached_ = true;
  const attach::Completion& completion = slot.completion;
  if (completion.staging_bytes > attach::kMaxStagingBytes) {
    throw PeerError("the daemon reports a staging area of " +
                    std::to_string(completion.staging_bytes) + " bytes, past the most there is");
  }
  staging_->map(completion.staging_bytes);
  if (value2) *value2 = completion.value2;
  const std::string message(completion.message, strnlen(completion.message, attach::kMessageBytes));
  if (completion.status == attach::Status::kInvalid) throw InvalidArgument(message);
  // A call that failed ends the session on every PE (see the session job).
  if (completion.status != attach::Status::kOk) throw PeerError("the session ended: " + message);
  return completion.value;
}

void* Session::malloc(size_t bytes) {
  const uint64_t offset = call(attach::Request{.op = attach::Op::kMalloc, .count = bytes});
  if (offset > slice_bytes_ || bytes > slice_bytes_ - offset) {
    throw PeerError("the daemon answered a malloc with an offset outside this PE's heap");
  }
  return slice_ + offset;
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

Session::WaitStats Session::wait_stats() {
  WaitStats stats;
  uint64_t blocked = 0;
  for (int pe = 0; pe < place_.world_size; ++pe) {
    attach::Request request{.op = attach::Op::kWaitStats};
    request.args[0] = uint64_t(pe);
    stats.wait_by_peer_s.push_back(double(call(request, &blocked)) * 1e-9);
  }
  stats.blocked_s = double(blocked) * 1e-9;
  return stats;
}

attach::Request Session::one_sided(attach::Op op, const char* call, void* dst, const void* src,
                                   size_t bytes, int pe, const uint64_t* signal,
                                   uint64_t value) const {
  if (pe < 0 || pe >= place_.world_size) {
    throw InvalidArgument(std::string(call) + ": PE " + std::to_string(pe) + " is outside 0.." +
                          std::to_string(place_.world_size - 1));
  }
  const std::string name(call);
  attach::Request request{.op = op,
                          .src = offset_of(src, bytes, (name + "'s source").c_str()),
                          .dst = offset_of(dst, bytes, (name + "'s destination").c_str()),
                          .count = bytes};
  if (signal) {
    request.args[1] =
        offset_of(signal, sizeof(uint64_t), (name + "'s signal word").c_str(), sizeof(uint64_t));
    request.args[2] = value;
  }
  request.args[0] = uint64_t(pe);
  if (pe == place_.rank && bytes && request.src < request.dst + bytes &&
      request.dst < request.src + bytes) {
    throw InvalidArgument(name + " to this PE itself: the source overlaps the destination");
  }
  return request;
}

void Session::get(void* dst, const void* src, size_t bytes, int pe, const uint64_t* done,
                  uint64_t done_value) {
  call(one_sided(attach::Op::kGet, "get", dst, src, bytes, pe, done, done_value));
}

void Session::put_signal(void* dst, const void* src, size_t bytes, const uint64_t* signal,
                         uint64_t value, int pe) {
  if (!signal) throw InvalidArgument("put_signal: the signal word is null");
  call(one_sided(attach::Op::kPutSignal, "put_signal", dst, src, bytes, pe, signal, value));
}

int Session::wait_for_word_change(std::span<const uint64_t* const> words,
                                  std::span<const uint64_t> seen,
                                  std::chrono::microseconds timeout) const {
  if (words.size() != seen.size()) {
    throw InvalidArgument("wait_for_word_change: " + std::to_string(words.size()) + " words and " +
                          std::to_string(seen.size()) + " values seen");
  }
  if (detached_) throw InvalidArgument("the session is detached");
  for (const uint64_t* word : words) {
    offset_of(word, sizeof(uint64_t), "a watched word", sizeof(uint64_t));
  }
  const Deadline deadline = Clock::now() + timeout;
  const auto spin_until = Clock::now() + std::chrono::microseconds(50);
  auto nap = std::chrono::microseconds(10);
  for (;;) {
    for (size_t i = 0; i < words.size(); ++i) {
      // Written by the daemon's transport or by another process: read as the atomic it is.
      const uint64_t now =
          std::atomic_ref(*const_cast<uint64_t*>(words[i])).load(std::memory_order_acquire);
      if (now != seen[i]) return int(i);
    }
    if (ring_->closed.load(std::memory_order_acquire)) {
      throw PeerError("the session ended: " + closed_reason());
    }
    const auto now = Clock::now();
    if (now >= deadline) return -1;
    if (now < spin_until) {
      cpu_relax();
      continue;
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(nap, deadline - now));
    nap = std::min(nap * 2, std::chrono::microseconds(200));
  }
}

void Session::all_reduce(void* data, size_t count, wire::DataType dtype, wire::Reduction op) {
  all_reduce(data, data, count, dtype, op);
}

void Session::all_reduce(void* dst, const void* src, size_t count, wire::DataType dtype,
                         wire::Reduction op) {
  const size_t e = element_bytes(dtype), bytes = count * e;
  call(attach::Request{.op = attach::Op::kAllReduce,
                       .dtype = uint32_t(dtype),
                       .reduce = uint32_t(op),
                       .src = offset_of(src, bytes, "all_reduce's input", e),
                       .dst = offset_of(dst, bytes, "all_reduce's output", e),
                       .count = count});
}

void Session::reduce_scatter(void* dst, const void* src, size_t count, wire::DataType dtype,
                             wire::Reduction op) {
  const size_t n = size_t(place_.world_size), e = element_bytes(dtype);
  const size_t mine = count * (place_.rank + 1) / n - count * place_.rank / n;
  call(attach::Request{.op = attach::Op::kReduceScatter,
                       .dtype = uint32_t(dtype),
                       .reduce = uint32_t(op),
                       .src = offset_of(src, count * e, "reduce_scatter's input", e),
                       .dst = offset_of(dst, mine * e, "reduce_scatter's output", e),
                       .count = count});
}

void Session::all_gather(void* dst, const void* src, size_t count, wire::DataType dtype) {
  const size_t e = element_bytes(dtype);
  call(attach::Request{
      .op = attach::Op::kAllGather,
      .dtype = uint32_t(dtype),
      .src = offset_of(src, count * e, "all_gather's input", e),
      .dst = offset_of(dst, count * place_.world_size * e, "all_gather's output", e),
      .count = count});
}

void Session::broadcast(void* dst, const void* src, size_t bytes, int root) {
  if (root < 0 || root >= place_.world_size) {
    throw InvalidArgument("broadcast: root " + std::to_string(root) + " is outside 0.." +
                          std::to_string(place_.world_size - 1));
  }
  const uint64_t from = offset_of(src, bytes, "broadcast's input");
  const uint64_t to = offset_of(dst, bytes, "broadcast's output");
  if (from != to && from < to + bytes && to < from + bytes) {
    throw InvalidArgument(
        "broadcast: the input and output overlap (allowed: the same bytes, "
        "or apart)");
  }
  call(attach::Request{.op = attach::Op::kBroadcast,
                       .src = from,
                       .dst = to,
                       .count = bytes,
                       .args = {uint64_t(root)}});
}

void Session::all_to_all(void* dst, const void* src, size_t count, wire::DataType dtype) {
  const size_t e = element_bytes(dtype), bytes = count * place_.world_size * e;
  call(attach::Request{.op = attach::Op::kAllToAll,
                       .dtype = uint32_t(dtype),
                       .src = offset_of(src, bytes, "all_to_all's input", e),
                       .dst = offset_of(dst, bytes, "all_to_all's output", e),
                       .count = count});
}

std::byte* Session::stage(attach::Request& request, uint64_t in_bytes, uint64_t out_bytes) {
  loans_->place(request, in_bytes, out_bytes);
  // Refused here, before anything is sent: the daemon's refusal would end the session.
  const uint64_t most = attach::kMaxStagingBytes;
  const uint64_t inputs = attach::align64(in_bytes);
  if (request.stage_at > most || inputs > most - request.stage_at ||
      out_bytes > most - request.stage_at - inputs) {
    throw InvalidArgument(
        "the call needs " + std::to_string(inputs) + " bytes of staging for its inputs and " +
        std::to_string(out_bytes) + " for its outputs, past " + std::to_string(request.stage_at) +
        " bytes that " + std::to_string(loans_->outstanding()) +
        " outputs still lent hold; allowed up to " + std::to_string(most) +
        " (drop or copy held outputs, pass tensors made with empty() to skip staging, or "
        "smaller ones)");
  }
  const uint64_t end = request.stage_at + in_bytes;
  if (staging_->bytes() < end) call(attach::Request{.op = attach::Op::kStage, .count = end});
  return staging_->range(request.stage_at, in_bytes, "the staging area");
}

DispatchHandle::~DispatchHandle() {
  // Sent with the session's next call: a destructor may run on any thread, even during a call
  // (Python's collector), and must not wait for one.
  if (alive_.lock()) session_->queue_release(id_);
}

void Session::stage_tokens(const char* call, const MoeTokens& t, int64_t most_tokens,
                           uint64_t out_bytes, attach::Request& request) {
  const size_t e = element_bytes(t.dtype);
  check_moe_width(call, t.hidden);
  if (t.tokens < 0 || t.tokens > most_tokens || t.topk < 1 || t.topk > kMaxMoeTopk ||
      t.topk > t.experts || t.experts > kMaxMoeExperts || t.experts % place_.world_size != 0) {
    throw InvalidArgument(
        std::string(call) + ": " + std::to_string(t.tokens) + " tokens, topk " +
        std::to_string(t.topk) + ", " + std::to_string(t.experts) +
        " experts; allowed tokens 0 to " + std::to_string(most_tokens) + " per PE, topk 1 to " +
        std::to_string(kMaxMoeTopk) + " and at most the experts, experts a multiple of the " +
        std::to_string(place_.world_size) + " PEs up to " + std::to_string(kMaxMoeExperts));
  }
  check_topk_ids(t.topk_idx, t.tokens, t.topk, t.experts, std::string(call) + "'s topk_idx");
  const auto in = attach::token_block(uint64_t(t.tokens), uint64_t(t.hidden), uint64_t(t.topk), e);
  std::byte* area = stage(request, in.end, out_bytes);
  place_input(request, t.x, size_t(t.tokens) * t.hidden * e, area + in.x, e);
  auto* ids = reinterpret_cast<int32_t*>(area + in.idx);
  for (int64_t i = 0; i < t.tokens * t.topk; ++i) ids[i] = int32_t(t.topk_idx[i]);
  if (t.tokens > 0) std::memcpy(area + in.weights, t.topk_weights, size_t(t.tokens) * t.topk * 4);
}

std::shared_ptr<DispatchHandle> Session::make_handle(uint64_t id, uint64_t received, uint64_t most,
                                                     const MoeTokens& t, int64_t max_tokens) {
  std::shared_ptr<DispatchHandle> handle(new DispatchHandle(this, alive_, id));
  if (received > most) {
    throw PeerError("the daemon reports " + std::to_string(received) +
                    " rows received, more than every PE could send");
  }
  handle->tokens = t.tokens;
  handle->received = int64_t(received);
  handle->hidden = t.hidden;
  handle->topk = t.topk;
  handle->experts = t.experts;
  handle->dtype = t.dtype;
  handle->max_tokens = max_tokens;
  return handle;
}

void Session::offer_room(attach::Request& request, const RecvRoom& room, int64_t tokens,
                         int64_t hidden, size_t element, const char* caller) const {
  const size_t bytes = size_t(std::max<int64_t>(room.rows, 0)) * size_t(hidden) * element;
  const auto offset = heap_place(room.x, bytes, element);
  request.output_place = offset ? attach::Place::kHeap : attach::Place::kStaging;
  request.dst = offset.value_or(0);
  request.dst_bytes = offset ? bytes : 0;
  attach::check_apart(request, uint64_t(tokens) * uint64_t(hidden) * element, request.dst_bytes,
                      caller, "x", "out");
}

void Session::take_recv_x(const attach::Request& request, uint64_t staged, uint64_t bytes, void* to,
                          std::shared_ptr<StagingLoan>* lent) {
  const bool in_room = request.output_place == attach::Place::kHeap && bytes <= request.dst_bytes;
  if (!to) {  // lent; or no rows (an empty vector's data() is null)
    if (lent) *lent = in_room ? nullptr : loans_->lend(staged, bytes);
    if (lent || bytes == 0) return;
    throw InvalidArgument("dispatch: allocate answered no recv_x for " + std::to_string(bytes) +
                          " bytes, and none may be lent");
  }
  const std::byte* recv_x =
      in_room ? slice_ + request.dst : staging_->range(staged, bytes, "dispatch's recv_x");
  if (to != recv_x) bulk_copy(to, recv_x, bytes);
}

std::shared_ptr<DispatchHandle> Session::dispatch(
    const void* x, const int64_t* topk_idx, const float* topk_weights, int64_t tokens,
    int64_t hidden, int topk, int experts, wire::DataType dtype,
    const std::function<DispatchOutputs(int64_t received)>& allocate, RecvRoom room,
    std::shared_ptr<StagingLoan>* lent_x, uint64_t active_nodes) {
  const std::lock_guard staging_held(staging_mutex_);
  const size_t e = element_bytes(dtype);
  const MoeTokens tokens_in{x, topk_idx, topk_weights, tokens, hidden, topk, experts, dtype};
  attach::Request request{
      .op = attach::Op::kDispatch,
      .dtype = uint32_t(dtype),
      .count = uint64_t(tokens),
      .args = {uint64_t(hidden), uint64_t(topk), uint64_t(experts), active_nodes}};
  stage_tokens("dispatch", tokens_in, kMaxMoeTokens, dispatch_outputs_, request);
  check_active_nodes(active_nodes, place_, topk_idx, tokens, topk, experts);
  offer_room(request, room, tokens, hidden, e, "dispatch");
  uint64_t received = 0;
  const uint64_t id = call(request, &received);
  const auto handle =
      make_handle(id, received, uint64_t(place_.world_size) * kMaxMoeTokens, tokens_in, 0);
  const auto in = attach::token_block(uint64_t(tokens), uint64_t(hidden), uint64_t(topk), e);
  const auto out = attach::token_block(received, uint64_t(hidden), uint64_t(topk), e);
  dispatch_outputs_ = out.end;
  const uint64_t at = attach::staged_outputs_at(request, in.end, out.end);
  const std::byte* from = staging_->range(at, out.end, "dispatch's output");
  const DispatchOutputs to = allocate(int64_t(received));
  take_recv_x(request, at + out.x, received * hidden * e, to.x, lent_x);
  const auto* got = reinterpret_cast<const int32_t*>(from + out.idx);
  for (uint64_t i = 0; i < received * topk; ++i) to.topk_idx[i] = got[i];
  if (received != 0) std::memcpy(to.topk_weights, from + out.weights, received * topk * 4);
  return handle;
}

void Session::combine(const DispatchHandle& handle, const void* rows, int64_t hidden,
                      wire::DataType dtype, const void* bias, void* out) {
  if (!out && handle.tokens != 0) {
    throw InvalidArgument("combine: out is null: pass the result's memory, or none to lend it");
  }
  combine_into(handle, rows, hidden, dtype, bias, out);
}

std::shared_ptr<StagingLoan> Session::combine(const DispatchHandle& handle, const void* rows,
                                              int64_t hidden, wire::DataType dtype,
                                              const void* bias) {
  return combine_into(handle, rows, hidden, dtype, bias, nullptr);
}

std::shared_ptr<StagingLoan> Session::combine_into(const DispatchHandle& handle, const void* rows,
                                                   int64_t hidden, wire::DataType dtype,
                                                   const void* bias, void* out) {
  const std::lock_guard staging_held(staging_mutex_);
  const size_t e = element_bytes(dtype);
  if (!handle.alive_.lock() || handle.session_ != this) {
    throw InvalidArgument("combine: the handle is from another session");
  }
  if (handle.max_tokens != 0) {
    throw InvalidArgument(
        "combine: the handle is a low-latency dispatch's: use low_latency_combine");
  }
  check_moe_width("combine", hidden);
  const auto block = attach::combine_block(uint64_t(handle.received), uint64_t(handle.tokens),
                                           uint64_t(hidden), bias != nullptr, e);
  const size_t row = size_t(hidden) * e, out_bytes = size_t(handle.tokens) * row;
  attach::Request request{.op = attach::Op::kCombine,
                          .dtype = uint32_t(dtype),
                          .count = uint64_t(handle.received),
                          .args = {handle.id_, bias ? 1u : 0u, uint64_t(hidden)}};
  std::byte* area = stage(request, block.end, out_bytes);
  place_input(request, rows, size_t(handle.received) * row, area + block.rows, e);
  if (bias) bulk_copy(area + block.bias, bias, out_bytes);
  place_output(request, uint64_t(handle.received) * row, out, out_bytes, e, "combine");
  return call_into(request, out, out_bytes, block.end);
}

std::shared_ptr<DispatchHandle> Session::low_latency_dispatch(
    const void* x, const int64_t* topk_idx, const float* topk_weights, int64_t tokens,
    int64_t hidden, int topk, int experts, int64_t max_tokens, wire::DataType dtype,
    const std::function<LowLatencyOutputs(int64_t received)>& allocate, RecvRoom room,
    std::shared_ptr<StagingLoan>* lent_x) {
  const std::lock_guard staging_held(staging_mutex_);
  const size_t e = element_bytes(dtype);
  if (max_tokens < 1 || max_tokens > kMaxLowLatencyTokens) {
    throw InvalidArgument("low_latency_dispatch: max_tokens " + std::to_string(max_tokens) +
                          "; allowed 1 to " + std::to_string(kMaxLowLatencyTokens));
  }
  // The outputs' most, for placing the call; stage_tokens refuses a wrong shape after.
  check_moe_width("low_latency_dispatch", hidden);
  const int local = std::clamp(experts, 0, kMaxMoeExperts) / place_.world_size;
  // Each token once per local expert it chose, from every PE.
  const uint64_t most = uint64_t(place_.world_size) * uint64_t(max_tokens) *
                        uint64_t(std::clamp(std::min(topk, local), 0, kMaxMoeTopk));
  const uint64_t most_out =
      attach::low_latency_block(most, uint64_t(hidden), uint64_t(local), e).end;
  if (most_out > attach::kMaxStagingBytes) {
    throw InvalidArgument("low_latency_dispatch: up to " + std::to_string(most) + " rows of " +
                          std::to_string(hidden) + " could arrive, " + std::to_string(most_out) +
                          " bytes of staging; allowed " + std::to_string(attach::kMaxStagingBytes) +
                          ": lower max_tokens or hidden");
  }
  const MoeTokens tokens_in{x, topk_idx, topk_weights, tokens, hidden, topk, experts, dtype};
  attach::Request request{
      .op = attach::Op::kLowLatencyDispatch,
      .dtype = uint32_t(dtype),
      .count = uint64_t(tokens),
      .args = {uint64_t(hidden), uint64_t(topk), uint64_t(experts), uint64_t(max_tokens)}};
  stage_tokens("low_latency_dispatch", tokens_in, max_tokens, most_out, request);
  offer_room(request, room, tokens, hidden, e, "low_latency_dispatch");
  const int half = low_latency_halves_.reserve({hidden, topk, experts, max_tokens, int64_t(dtype)});
  uint64_t received = 0, id = 0;
  try {
    id = call(request, &received);
  } catch (...) {
    low_latency_halves_.cancel(half);
    throw;
  }
  low_latency_halves_.hold(half, id);
  const auto handle = make_handle(id, received, most, tokens_in, max_tokens);
  const auto in = attach::token_block(uint64_t(tokens), uint64_t(hidden), uint64_t(topk), e);
  const auto out = attach::low_latency_block(received, uint64_t(hidden), uint64_t(local), e);
  const uint64_t at = attach::staged_outputs_at(request, in.end, out.end);
  const LowLatencyOutputs to = allocate(int64_t(received));
  take_recv_x(request, at + out.x, received * hidden * e, to.x, lent_x);
  std::memcpy(to.counts, staging_->range(at + out.counts, size_t(local) * 8, "counts"),
              size_t(local) * 8);
  return handle;
}

void Session::low_latency_combine(const DispatchHandle& handle, const void* rows, void* out) {
  if (!out && handle.tokens != 0) {
    throw InvalidArgument(
        "low_latency_combine: out is null: pass the result's memory, or none to lend it");
  }
  low_latency_combine_into(handle, rows, out);
}

std::shared_ptr<StagingLoan> Session::low_latency_combine(const DispatchHandle& handle,
                                                          const void* rows) {
  return low_latency_combine_into(handle, rows, nullptr);
}

std::shared_ptr<StagingLoan> Session::low_latency_combine_into(const DispatchHandle& handle,
                                                               const void* rows, void* out) {
  const std::lock_guard staging_held(staging_mutex_);
  if (!handle.alive_.lock() || handle.session_ != this) {
    throw InvalidArgument("low_latency_combine: the handle is from another session");
  }
  if (handle.max_tokens == 0) {
    throw InvalidArgument("low_latency_combine: the handle is a normal dispatch's: use combine");
  }
  const size_t e = element_bytes(handle.dtype), row = size_t(handle.hidden) * e;
  const size_t out_bytes = size_t(handle.tokens) * row;
  const auto block = attach::combine_block(uint64_t(handle.received), uint64_t(handle.tokens),
                                           uint64_t(handle.hidden), false, e);
  attach::Request request{.op = attach::Op::kLowLatencyCombine,
                          .dtype = uint32_t(handle.dtype),
                          .count = uint64_t(handle.received),
                          .args = {handle.id_}};
  std::byte* area = stage(request, block.end, out_bytes);
  place_input(request, rows, size_t(handle.received) * row, area + block.rows, e);
  place_output(request, uint64_t(handle.received) * row, out, out_bytes, e, "low_latency_combine");
  // Last before the call: a combine refused before it is sent leaves its dispatch uncombined.
  if (!low_latency_halves_.free(handle.id_)) {
    throw InvalidArgument(
        "low_latency_combine: this dispatch was combined already: dispatch again (a low-latency "
        "dispatch is combined once)");
  }
  return call_into(request, out, out_bytes, block.end);
}

uint64_t Session::fused(attach::Op op, const void* a, const void* b, void* c, void* gathered,
                        int64_t a_rows, int64_t c_rows, int64_t n, int64_t k, wire::DataType dtype,
                        wire::MatmulMode mode) {
  const std::lock_guard staging_held(staging_mutex_);
  const size_t e = element_bytes(dtype);
  check_fused_call_mode(uint64_t(mode));
  for (const int64_t dim : {a_rows, c_rows, n, k}) {
    if (dim < 1 || dim > kMaxFusedDim) {
      throw InvalidArgument("rows " + std::to_string(a_rows) + ", n " + std::to_string(n) + ", k " +
                            std::to_string(k) + ": each must be 1 to " +
                            std::to_string(kMaxFusedDim));
    }
  }
  const auto block = attach::fused_block(uint64_t(a_rows), uint64_t(c_rows), uint64_t(n),
                                         uint64_t(k), gathered != nullptr, e);
  attach::Request request{.op = op,
                          .dtype = uint32_t(dtype),
                          .args = {uint64_t(a_rows), uint64_t(n), uint64_t(k), uint64_t(mode)}};
  // A and B are the inputs' block; C (and the gathered A) the outputs'.
  std::byte* area = stage(request, block.c, block.end - block.c);
  bulk_copy(area + block.a, a, size_t(a_rows) * k * e);
  bulk_copy(area + block.b, b, size_t(k) * n * e);
  const uint64_t rows = call(request);
  if (rows > uint64_t(c_rows)) {
    throw PeerError("the daemon returned " + std::to_string(rows) + " rows; at most " +
                    std::to_string(c_rows) + " fit");
  }
  const auto out =
      attach::fused_block(uint64_t(a_rows), rows, uint64_t(n), uint64_t(k), gathered != nullptr, e);
  const uint64_t at = attach::staged_outputs_at(request, block.c, out.end - out.c) - out.c;
  bulk_copy(c, staging_->range(at + out.c, rows * n * e, "the result"), rows * n * e);
  if (gathered) {
    bulk_copy(gathered, staging_->range(at + out.gathered, rows * k * e, "the gathered A"),
              rows * k * e);
  }
  return rows;
}

void Session::gemm_all_reduce(const void* a, const void* b, void* c, int64_t m, int64_t n,
                              int64_t k, wire::DataType dtype, wire::MatmulMode mode) {
  fused(attach::Op::kGemmAllReduce, a, b, c, nullptr, m, m, n, k, dtype, mode);
}

int64_t Session::matmul_reduce_scatter(const void* a, const void* b, void* c, int64_t m, int64_t n,
                                       int64_t k, wire::DataType dtype, wire::MatmulMode mode) {
  const int64_t most = (m + place_.world_size - 1) / place_.world_size;
  return int64_t(
      fused(attach::Op::kMatmulReduceScatter, a, b, c, nullptr, m, most, n, k, dtype, mode));
}

void Session::all_gather_matmul(const void* a, const void* b, void* c, void* gathered, int64_t rows,
                                int64_t n, int64_t k, wire::DataType dtype, wire::MatmulMode mode) {
  fused(attach::Op::kAllGatherMatmul, a, b, c, gathered, rows, rows * place_.world_size, n, k,
        dtype, mode);
}

}  // namespace symmesh
