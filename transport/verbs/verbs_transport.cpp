#include "transport/verbs/verbs_transport.h"

#include <arpa/inet.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/errors.h"
#include "common/thread_name.h"
#include "transport/segment_ops.h"
#include "transport/verbs/async_events.h"
#include "transport/verbs/device_atomics.h"

namespace symmesh {
namespace {

constexpr int kPollBatch = 32;
constexpr int kSpinsBeforeYield = 64;

uint64_t work_id(int peer, uint64_t seq) {
  return (uint64_t(peer) << 48) | seq;
}
int work_peer(uint64_t id) {
  return static_cast<int>(id >> 48);
}
uint64_t work_seq(uint64_t id) {
  return id & ((uint64_t{1} << 48) - 1);
}

const char* opcode_name(ibv_wr_opcode opcode) {
  switch (opcode) {
    case IBV_WR_RDMA_WRITE:
      return "RDMA_WRITE";
    case IBV_WR_RDMA_WRITE_WITH_IMM:
      return "RDMA_WRITE_WITH_IMM";
    case IBV_WR_RDMA_READ:
      return "RDMA_READ";
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      return "ATOMIC_FETCH_AND_ADD";
    default:
      return "other";
  }
}

// `deadline` is the whole operation's: a put cut into many pieces, each of which may wait for
// bounce space or send-queue room, still ends within about one op_timeout, or at the node's
// abort (a put's data is in the bounce ring or inlined before it waits, and reads and atomics
// land there: nothing in flight needs the caller's memory).
// `describe` says what is waited for; a wait that collects a failure's cause (`abortable`
// false while it does) is not cut short by the abort that failure itself set off.
struct Abortable {
  bool operator()() const { return true; }
};
template <class Done, class MayAbort = Abortable>
void spin_until(Done&& done, OperationDeadline& deadline,
                const std::function<std::string()>& describe, MayAbort&& abortable = {}) {
  const auto give_up_if_aborted = [&] {
    if (!deadline.aborted() || !abortable()) return;
    throw AbortedError(describe() + ": stopped: the node was aborted: " + deadline.abort_reason());
  };
  const auto timed_out = [&] {
    return TimeoutError(describe() + ": still so at the operation's deadline");
  };
  give_up_if_aborted();
  // Before the first check: a wait whose first poll always succeeds still reads the clock.
  if (deadline.passed_at_wait()) throw timed_out();
  for (int spins = 0; !done(); ++spins) {
    if (spins >= kSpinsBeforeYield) {
      // The clock only every few yields (see yield_until in transport/wait.h).
      if (spins % kYieldsPerClockRead == 0) {
        give_up_if_aborted();
        if (deadline.passed()) throw timed_out();
      }
      std::this_thread::yield();
    }
  }
}

}  // namespace

// A zero-length signaled write: its completion vouches for every request before it.
VerbsTransport::Request VerbsTransport::completion_marker() {
  Request request(IBV_WR_RDMA_WRITE, 0, nullptr, 0);
  request.signaled = true;
  return request;
}

VerbsTransport::Request VerbsTransport::wake_up() {
  return Request(IBV_WR_RDMA_WRITE_WITH_IMM, 0, nullptr, 0);
}

VerbsTransport::VerbsTransport(int node, int nodes, int ranks_per_node, SegmentView segment,
                               Doorbell& doorbell, VerbsOptions options)
    : RdmaTransport(nodes),
      node_(node),
      nodes_(nodes),
      ranks_per_node_(ranks_per_node),
      segment_(segment),
      doorbell_(doorbell),
      options_(std::move(options)),
      device_(std::make_unique<VerbsDevice>(options_.device)),
      segment_mr_(register_segment(*device_, segment)),
      remotes_(nodes) {
  // A chain of kMaxChain requests must fit beside signal_interval - 1 unsignaled ones, or a
  // full queue could hold no signaled request whose completion frees it.
  if (options_.bounce_bytes < 4096 || options_.signal_interval == 0 ||
      options_.signal_interval + kMaxChain > options_.send_depth) {
    throw InvalidArgument(
        "verbs: bounce ring must be at least 4 KiB and the signal interval in 1..send depth-" +
        std::to_string(kMaxChain));
  }
  channel_ = ibv_create_comp_channel(device_->context());
  const int peers = nodes + 1;  // the other nodes, and this node's own loop (two QPs)
  recv_cq_ = ibv_create_cq(device_->context(), int(options_.recv_depth) * peers * ranks_per_node,
                           nullptr, channel_, 0);
  if (!channel_ || !recv_cq_) throw Error("verbs: creating the receive completion queue failed");
  ibv_req_notify_cq(recv_cq_, 0);
  QpLimits limits{options_.send_depth, options_.recv_depth, 64};
  for (int local = 0; local < ranks_per_node; ++local) {
    auto pe = std::make_unique<PeState>();
    pe->cq = ibv_create_cq(device_->context(), int(options_.send_depth) * peers, pe.get(),
                           options_.progress_thread ? channel_ : nullptr, 0);
    if (!pe->cq) throw Error("verbs: creating a send completion queue failed");
    if (options_.progress_thread) ibv_req_notify_cq(pe->cq, 0);
    pe->bounce = std::make_unique<BounceBuffer>(*device_, options_.bounce_bytes);
    pe->qps.resize(nodes);
    for (int peer = 0; peer < nodes; ++peer) {
      auto qp = std::make_unique<VerbsPair>(*device_, pe->cq, recv_cq_, limits, 0);
      by_qpn_[qp->qpn()] = {peer, qp.get()};
      pe->qps[peer].qp = std::move(qp);
      pe->qps[peer].opcodes.resize(options_.send_depth);
    }
    connect_loop(*pe, limits);
    pes_.push_back(std::move(pe));
  }
  remotes_[node] =
      Remote{reinterpret_cast<uint64_t>(segment.base), segment_mr_->rkey, segment.size,
             std::min<uint64_t>(device_->max_msg_sz(), options_.bounce_bytes / 4), true};
  make_async_events_nonblocking(*device_);
  stop_fd_ = eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    throw Error(std::string("verbs: creating the notifier's stop descriptor (eventfd) failed: ") +
                std::strerror(errno));
  }
  notifier_ = std::thread([this] {
    set_thread_name("verbs notify");
    notifier_loop();
  });
}

// The QP to this node itself (qps[node_]) goes through the device to a second QP, so that
// DeviceAtomicsTransport can add to this node's words the way peers do.
void VerbsTransport::connect_loop(PeState& pe, const QpLimits& limits) {
  pe.loop_in = std::make_unique<VerbsPair>(*device_, pe.cq, recv_cq_, limits, 0);
  by_qpn_[pe.loop_in->qpn()] = {node_, pe.loop_in.get()};
  VerbsPair& out = *pe.qps[node_].qp;
  QpRemote to_in{pe.loop_in->qpn(), pe.loop_in->psn(), device_->gid(), device_->lid()};
  QpRemote to_out{out.qpn(), out.psn(), device_->gid(), device_->lid()};
  out.connect(to_in, device_->active_mtu());
  pe.loop_in->connect(to_out, device_->active_mtu());
}

VerbsTransport::~VerbsTransport() {
  shutdown();
  for (auto& pe : pes_) {
    pe->qps.clear();  // the queue pairs before their completion queues
    pe->loop_in.reset();
    ibv_destroy_cq(pe->cq);
  }
  by_qpn_.clear();
  if (recv_cq_) ibv_destroy_cq(recv_cq_);
  if (channel_) ibv_destroy_comp_channel(channel_);
  if (stop_fd_ >= 0) close(stop_fd_);
}

void VerbsTransport::shutdown() {
  if (!notifier_.joinable()) return;
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = write(stop_fd_, &one, sizeof(one));
  notifier_.join();
}

wire::VerbsInfo VerbsTransport::local_info() const {
  return verbs_address(
      *device_, segment_, segment_mr_->rkey, node_, nodes_, ranks_per_node_,
      [this](int local, int peer) -> const VerbsPair& { return *pes_[local]->qps[peer].qp; });
}

void VerbsTransport::connect(int peer, const wire::VerbsInfo& remote) {
  if (peer < 0 || peer >= nodes_ || peer == node_) {
    throw InvalidArgument("verbs: node " + std::to_string(peer) + " is not a peer of node " +
                          std::to_string(node_));
  }
  const VerbsPeerAddress address = read_verbs_address(remote, peer, node_, ranks_per_node_,
                                                      segment_.size, device_->active_mtu());
  for (int local = 0; local < ranks_per_node_; ++local) {
    pes_[local]->qps[peer].qp->connect(address.pairs[local], address.path_mtu);
  }
  Remote& r = remotes_[peer];
  r.addr = address.addr;
  r.rkey = address.rkey;
  r.length = address.length;
  r.max_message = std::min<uint64_t>(address.max_msg_sz, device_->max_msg_sz());
  if (options_.max_message > 0)
    r.max_message = std::min<uint64_t>(r.max_message, options_.max_message);
  r.max_message = std::min<uint64_t>(r.max_message, options_.bounce_bytes / 4);
  r.connected = true;
  spdlog::debug("verbs: connected to node {} over {} (path MTU {})", peer, device_->describe(),
                mtu_bytes(address.path_mtu));
}

void VerbsTransport::shape_wait_policy(WaitPolicy& policy) {
  policy.yield_for = options_.notify_interval;
}

std::unique_ptr<Transport> VerbsTransport::own_node_transport(Transport& shm, SegmentView segment,
                                                              Doorbell& doorbell) {
  if (device_->atomics_global()) return nullptr;
  return std::make_unique<DeviceAtomicsTransport>(shm, *this, segment, doorbell);
}

bool VerbsTransport::connected(int peer) const {
  return peer >= 0 && peer < nodes_ && remotes_[peer].connected;
}

void VerbsTransport::mark_down(int peer, const std::string& why, bool cause) {
  if (!health_.mark_down(peer, why, cause)) return;
  spdlog::error("verbs: node {} marked down: {}", peer, why);
  doorbell_.ring();
  health_.announce(peer, why);
}

int VerbsTransport::local_rank_of(int src_pe) const {
  if (src_pe / ranks_per_node_ != node_ || src_pe < 0) {
    throw InvalidArgument("verbs: PE " + std::to_string(src_pe) + " is not on node " +
                          std::to_string(node_));
  }
  return src_pe % ranks_per_node_;
}

VerbsTransport::PeState& VerbsTransport::pe_state(int src_pe) {
  return *pes_[local_rank_of(src_pe)];
}

void VerbsTransport::check_peer(int node, const QpState* draining) const {
  if (node < 0 || node >= nodes_ || !remotes_[node].connected) {
    throw InvalidArgument("verbs: node " + std::to_string(node_) + " has no queue pairs to node " +
                          std::to_string(node));
  }
  if (health_.up(node) || (draining && in_error(*draining))) return;
  health_.throw_down(node, "verbs: node " + std::to_string(node));
}

void VerbsTransport::check_range(int node, uint64_t offset, uint64_t length, bool word) const {
  check_peer(node);
  if (auto problem = symmesh::check_range(offset, length, remotes_[node].length, word);
      !problem.empty()) {
    throw InvalidArgument("verbs: node " + std::to_string(node) + ": " + problem);
  }
}

void VerbsTransport::check_access(PeState& pe, int node, uint64_t offset, uint64_t length,
                                  bool word, OperationDeadline& deadline) {
  try {
    check_range(node, offset, length, word);
  } catch (const PeerError&) {
    std::lock_guard lock(pe.mutex);
    settle(pe, node, deadline);
    check_peer(node);  // names the cause if settling found it
    throw;
  }
}

bool VerbsTransport::in_error(const QpState& qp) const {
  std::lock_guard lock(errored_mutex_);
  return qp.qp && errored_qps_.count(qp.qp->qpn()) != 0;
}

void VerbsTransport::settle(PeState& pe, int node, OperationDeadline& deadline) {
  QpState& qp = pe.qps[node];
  if (!in_error(qp)) return;
  // Collects the failure's cause, so the abort that failure set off does not cut it short.
  spin_until([&] { return poll(pe) == 0 && qp.completed == qp.posted; }, deadline,
             [&] {
               return "verbs: " + std::to_string(qp.posted - qp.completed) + " requests to node " +
                      std::to_string(node) + " (QP " + std::to_string(qp.qp->qpn()) +
                      ") not completed after it failed";
             },
             [] { return false; });
}

VerbsTransport::StagingScope::~StagingScope() {
  if (std::uncaught_exceptions() == exceptions_) return;
  // Every range before the last posted request's end may still be in use; none after it is.
  pe_.bounce->ring.take_back_from(pe_.staged.empty() ? 0 : pe_.staged.back().ring_end);
}

uint64_t VerbsTransport::post(PeState& pe, int peer, Request request, OperationDeadline& deadline) {
  return post(pe, peer, std::span<Request>(&request, 1), deadline);
}

uint64_t VerbsTransport::post(PeState& pe, int peer, std::span<Request> requests,
                              OperationDeadline& deadline) {
  QpState& qp = pe.qps[peer];
  const uint64_t count = requests.size();
  if (count == 0 || count > kMaxChain)
    throw std::logic_error("verbs: a chain is 1..kMaxChain long");
  if (qp.posted - qp.completed + count > options_.send_depth - 1) {
    // Full: the interval guarantees a signaled request among the outstanding ones.
    spin_until(
        [&] {
          poll(pe);
          check_peer(peer);
          return qp.posted - qp.completed + count <= options_.send_depth - 1;
        },
        deadline,
        [&] {
          return "verbs: send queue to node " + std::to_string(peer) + " (QP " +
                 std::to_string(qp.qp->qpn()) + ") is full (" + timeout_text() + ")";
        });
  }
  // One linked list of work requests, so one doorbell (on soft-RoCE one system call, one run
  // of the kernel's requester) carries them all.
  std::array<ibv_sge, kMaxChain> sges{};
  std::array<ibv_send_wr, kMaxChain> wrs{};
  std::array<bool, kMaxChain> signaled{};
  const Remote& remote = remotes_[peer];
  uint32_t unsignaled = qp.unsignaled;
  for (size_t i = 0; i < count; ++i) {
    const Request& request = requests[i];
    signaled[i] = request.signaled || unsignaled + 1 >= options_.signal_interval;
    unsignaled = signaled[i] ? 0 : unsignaled + 1;
    ibv_sge& sge = sges[i];
    sge.addr = reinterpret_cast<uint64_t>(request.local);
    sge.length = request.length;
    sge.lkey = pe.bounce->lkey();
    ibv_send_wr& wr = wrs[i];
    wr.wr_id = work_id(peer, qp.posted + i);
    wr.next = i + 1 < count ? &wrs[i + 1] : nullptr;
    wr.opcode = request.opcode;
    wr.sg_list = &sge;
    wr.num_sge = request.length > 0 || request.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? 1 : 0;
    wr.send_flags =
        (signaled[i] ? IBV_SEND_SIGNALED : 0) | (request.inline_data ? IBV_SEND_INLINE : 0);
    if (request.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic.remote_addr = remote.addr + request.remote_offset;
      wr.wr.atomic.rkey = remote.rkey;
      wr.wr.atomic.compare_add = request.add;
    } else {
      wr.wr.rdma.remote_addr = remote.addr + request.remote_offset;
      wr.wr.rdma.rkey = remote.rkey;
    }
    if (request.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) wr.imm_data = htonl(uint32_t(node_));
  }
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp.qp->get(), wrs.data(), &bad);
  // The requests before the one refused were posted: they are accounted for (quiet waits
  // for them) before the error is thrown. A provider that names none (bad outside the chain)
  // may have queued them all: they are counted, so they complete or flush before a quiet ends.
  size_t accepted = count;
  for (size_t i = 0; rc != 0 && i < count; ++i) {
    if (bad == &wrs[i]) accepted = i;
  }
  for (size_t i = 0; i < accepted; ++i) {
    const Request& request = requests[i];
    const uint64_t seq = qp.posted++;
    qp.opcodes[seq % qp.opcodes.size()] = request.opcode;
    if (request.opcode == IBV_WR_RDMA_READ || request.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      qp.unordered_upto = seq + 1;
    }
    if (signaled[i]) {
      qp.signaled_upto = seq + 1;
      qp.unsignaled = 0;
    } else {
      ++qp.unsignaled;
    }
    if (request.ring_end) pe.staged.push_back(Staged{peer, seq, *request.ring_end});
    // Counted once posted: a wake-up that a failed wait kept back does not hold off the next.
    if (request.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) qp.notified = Clock::now();
  }
  if (rc != 0) {
    throw PeerError("verbs: posting to node " + std::to_string(peer) + " (QP " +
                    std::to_string(qp.qp->qpn()) + ") failed: " + std::strerror(rc));
  }
  return qp.posted - 1;
}

int VerbsTransport::poll(PeState& pe) {
  ibv_wc wcs[kPollBatch];
  const int n = ibv_poll_cq(pe.cq, kPollBatch, wcs);
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    const int peer = work_peer(wc.wr_id);
    QpState& qp = pe.qps[peer];
    if (wc.status != IBV_WC_SUCCESS) {
      // After the first failure every outstanding request of the QP is flushed: those are
      // counted and summarised once, not reported one by one.
      const auto opcode = qp.opcodes[work_seq(wc.wr_id) % qp.opcodes.size()];
      const bool flushed = wc.status == IBV_WC_WR_FLUSH_ERR;
      if (!flushed || qp.flushed == 0) {
        mark_down(peer,
                  std::string("work completion failed: ") + ibv_wc_status_str(wc.status) +
                      " (opcode " + opcode_name(opcode) + ", node " + std::to_string(peer) +
                      ", QP " + std::to_string(wc.qp_num) + ")",
                  !flushed);
      }
      if (flushed && qp.flushed++ == 0) {
        spdlog::warn("verbs: the requests still queued to node {} (QP {}) are being flushed", peer,
                     wc.qp_num);
      }
      qp.completed = qp.posted;
      continue;
    }
    qp.completed = std::max(qp.completed, work_seq(wc.wr_id) + 1);
  }
  while (!pe.staged.empty()) {
    const Staged& front = pe.staged.front();
    if (front.seq >= pe.qps[front.peer].completed) break;
    pe.bounce->ring.release_to(front.ring_end);
    pe.staged.pop_front();
  }
  return n;
}

void VerbsTransport::wait_done(PeState& pe, int peer, uint64_t seq, const char* what,
                               OperationDeadline& deadline) {
  QpState& qp = pe.qps[peer];
  spin_until(
      [&] {
        poll(pe);
        check_peer(peer);
        return qp.completed > seq;
      },
      deadline,
      [&] {
        return std::string("verbs: ") + what + " on node " + std::to_string(peer) + " (QP " +
               std::to_string(qp.qp->qpn()) + ") has not completed (" + timeout_text() + ")";
      });
}

uint64_t VerbsTransport::stage(PeState& pe, int peer, uint64_t bytes, OperationDeadline& deadline) {
  std::optional<uint64_t> position = pe.bounce->ring.allocate(bytes);
  if (position) return *position;
  spin_until(
      [&] {
        poll(pe);
        if (!pe.staged.empty()) {
          // The oldest holder may sit behind unsignaled requests: ask for a completion.
          const Staged& front = pe.staged.front();
          QpState& holder = pe.qps[front.peer];
          if (holder.signaled_upto <= front.seq) {
            post(pe, front.peer, completion_marker(), deadline);
          }
        }
        check_peer(peer);
        position = pe.bounce->ring.allocate(bytes);
        return position.has_value();
      },
      deadline,
      [&] {
        std::string state = "verbs: no bounce space for " + std::to_string(bytes) + " bytes (" +
                            timeout_text() + "; ring " + std::to_string(pe.bounce->ring.in_use()) +
                            " of " + std::to_string(pe.bounce->ring.capacity()) +
                            " bytes in use by " + std::to_string(pe.staged.size()) + " requests";
        if (!pe.staged.empty()) {
          const Staged& front = pe.staged.front();
          const QpState& holder = pe.qps[front.peer];
          state += "; oldest: request " + std::to_string(front.seq) + " to node " +
                   std::to_string(front.peer) + ", whose QP has posted " +
                   std::to_string(holder.posted) + ", completed " +
                   std::to_string(holder.completed) + ", signaled up to " +
                   std::to_string(holder.signaled_upto);
        }
        return state + ")";
      });
  return *position;
}

std::string VerbsTransport::timeout_text() const {
  return "op_timeout " + std::to_string(options_.op_timeout.count()) + " ms";
}

bool VerbsTransport::wake_up_due(const QpState& qp) const {
  return Clock::now() - qp.notified >= options_.notify_interval;
}

void VerbsTransport::attach(PeState& pe, int node, Request& request, PieceCursor& data,
                            OperationDeadline& deadline) {
  if (request.length <= pe.qps[node].qp->max_inline()) {
    if (const std::byte* contiguous = data.take_contiguous(request.length)) {
      request.local = contiguous;
      request.inline_data = true;
      return;
    }
  }
  const uint64_t position = stage(pe, node, request.length, deadline);
  std::byte* to = pe.bounce->at(position);
  data.take(request.length, [&](const std::byte* from, size_t n) {
    std::memcpy(to, from, n);
    to += n;
  });
  request.local = pe.bounce->at(position);
  request.ring_end = pe.bounce->ring.tail();
}

void VerbsTransport::put_gather(int src_pe, int node, uint64_t offset,
                                std::span<const PutPiece> source, const SignalUpdate* signal) {
  const size_t length = total_length(source);
  PeState& pe = pe_state(src_pe);
  OperationDeadline deadline(options_.op_timeout, doorbell_);
  check_access(pe, node, offset, length, false, deadline);
  if (signal) check_access(pe, node, signal->offset, 8, true, deadline);
  traffic_.sent(node, length);
  std::lock_guard lock(pe.mutex);
  StagingScope staging(pe);
  const bool set_signal = signal && signal->op == SignalOp::kSet;
  // A SET signal is posted in one chain with the last piece of data (one doorbell).
  std::array<Request, kMaxChain> chain{Request(IBV_WR_RDMA_WRITE, 0, nullptr, 0),
                                       Request(IBV_WR_RDMA_WRITE, 0, nullptr, 0)};
  size_t chained = 0;
  size_t done = 0;    // bytes attached
  size_t posted = 0;  // bytes posted
  const auto put_text = [&] {
    return "verbs: a put of " + std::to_string(length) + " bytes to node " + std::to_string(node);
  };
  try {
    // One write per max_message of the pieces' bytes, gathered into the bounce ring.
    PieceCursor pieces(source);
    while (done < length) {
      const size_t n = std::min<size_t>(length - done, remotes_[node].max_message);
      Request request(IBV_WR_RDMA_WRITE, offset + done, nullptr, uint32_t(n));
      attach(pe, node, request, pieces, deadline);
      done += n;
      if (set_signal && done == length) {
        chain[chained++] = request;
      } else {
        post(pe, node, request, deadline);
        posted = done;
      }
    }
    if (set_signal) {
      const bool wake = wake_up_due(pe.qps[node]);
      Request& request = chain[chained++];
      request = Request(wake ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE, signal->offset,
                        nullptr, 8);
      const PutPiece value{&signal->value, sizeof signal->value};
      PieceCursor value_cursor(std::span(&value, 1));
      attach(pe, node, request, value_cursor, deadline);
      post(pe, node, std::span<Request>(chain.data(), chained), deadline);
    } else if (signal) {
      post_fetch_add(pe, node, signal->offset, signal->value, false, deadline);
    }
  } catch (const TimeoutError& e) {
    throw TimeoutError(put_text() + " had posted " + std::to_string(posted) +
                       " of them at its deadline: " + e.what());
  } catch (const AbortedError& e) {
    throw AbortedError(put_text() + " stopped after posting " + std::to_string(posted) +
                       " of them: " + e.what());
  }
}

void VerbsTransport::get(int src_pe, int node, uint64_t offset, void* out, size_t length) {
  if (length == 8 && offset % 8 == 0) {  // a word: atomic, as the interface promises
    const uint64_t value = atomic_fetch_add(src_pe, node, offset, 0);
    std::memcpy(out, &value, 8);
    return;
  }
  PeState& pe = pe_state(src_pe);
  OperationDeadline deadline(options_.op_timeout, doorbell_);
  check_access(pe, node, offset, length, false, deadline);
  std::lock_guard lock(pe.mutex);
  StagingScope staging(pe);
  auto* bytes = static_cast<std::byte*>(out);
  for (size_t done = 0; done < length;) {
    const size_t n = std::min<size_t>(length - done, remotes_[node].max_message);
    const uint64_t position = stage(pe, node, n, deadline);
    Request request(IBV_WR_RDMA_READ, offset + done, pe.bounce->at(position), uint32_t(n));
    request.signaled = true;
    request.ring_end = pe.bounce->ring.tail();
    const uint64_t seq = post(pe, node, request, deadline);
    wait_done(pe, node, seq, "an RDMA read", deadline);
    std::memcpy(bytes + done, pe.bounce->at(position), n);
    done += n;
  }
  traffic_.sent(node, 0);
  traffic_.received(node, length);
}

VerbsTransport::Posted VerbsTransport::post_fetch_add(PeState& pe, int node, uint64_t offset,
                                                      uint64_t value, bool signaled,
                                                      OperationDeadline& deadline) {
  const uint64_t position = stage(pe, node, 8, deadline);
  std::array<Request, kMaxChain> chain{
      Request(IBV_WR_ATOMIC_FETCH_AND_ADD, offset, pe.bounce->at(position), 8, value), wake_up()};
  chain[0].signaled = signaled;
  chain[0].ring_end = pe.bounce->ring.tail();
  // An add that changes the word wakes the target in the same chain: one doorbell, and one
  // wait for room in the queue, so a wait that times out has posted neither.
  const size_t count = value != 0 && wake_up_due(pe.qps[node]) ? 2 : 1;
  const uint64_t last = post(pe, node, std::span<Request>(chain.data(), count), deadline);
  return Posted{last - (count - 1), position};
}

void VerbsTransport::atomic_add(int src_pe, int node, uint64_t offset, uint64_t value) {
  PeState& pe = pe_state(src_pe);
  OperationDeadline deadline(options_.op_timeout, doorbell_);
  check_access(pe, node, offset, 8, true, deadline);
  traffic_.sent(node, 8);
  std::lock_guard lock(pe.mutex);
  StagingScope staging(pe);
  post_fetch_add(pe, node, offset, value, false, deadline);
}

uint64_t VerbsTransport::atomic_fetch_add(int src_pe, int node, uint64_t offset, uint64_t value) {
  PeState& pe = pe_state(src_pe);
  OperationDeadline deadline(options_.op_timeout, doorbell_);
  check_access(pe, node, offset, 8, true, deadline);
  traffic_.sent(node, 8);
  std::lock_guard lock(pe.mutex);
  StagingScope staging(pe);
  const auto [seq, position] = post_fetch_add(pe, node, offset, value, true, deadline);
  wait_done(pe, node, seq, "an atomic fetch-add", deadline);
  uint64_t old = 0;
  std::memcpy(&old, pe.bounce->at(position), 8);
  return old;
}

void VerbsTransport::fence(int src_pe) {
  // RC executes a QP's writes and atomics in order, but a later write may pass an earlier
  // read or atomic: wait for those (IBV_SEND_FENCE would do it in the device, but soft-RoCE
  // in Linux 6.1 stalls the QP on it; see README).
  PeState& pe = pe_state(src_pe);
  OperationDeadline deadline(options_.op_timeout, doorbell_);
  std::lock_guard lock(pe.mutex);
  for (int peer = 0; peer < nodes_; ++peer) {
    QpState& qp = pe.qps[peer];
    if (!qp.qp || qp.completed >= qp.unordered_upto) continue;
    if (qp.signaled_upto < qp.unordered_upto) post(pe, peer, completion_marker(), deadline);
    spin_until(
        [&] {
          poll(pe);
          check_peer(peer);
          return qp.completed >= qp.unordered_upto;
        },
        deadline,
        [&] {
          return "verbs: fence: a read or atomic to node " + std::to_string(peer) +
                 " has not completed (" + timeout_text() + ")";
        });
  }
}

void VerbsTransport::quiet_locked(PeState& pe, OperationDeadline deadline) {
  for (int peer = 0; peer < nodes_; ++peer) {
    QpState& qp = pe.qps[peer];
    if (!qp.qp || qp.completed == qp.posted) continue;
    settle(pe, peer, deadline);
    check_peer(peer);
    if (qp.signaled_upto < qp.posted) {
      post(pe, peer, completion_marker(), deadline);
    }
    spin_until(
        [&] {
          poll(pe);
          // A queue pair the notifier saw fail is waited out: its failed request, the cause,
          // may complete after the notifier's news, and the error should name it.
          check_peer(peer, &qp);
          return qp.completed == qp.posted;
        },
        deadline,
        [&] {
          return "verbs: quiet: " + std::to_string(qp.posted - qp.completed) +
                 " requests to node " + std::to_string(peer) + " (QP " +
                 std::to_string(qp.qp->qpn()) + ") outstanding";
        },
        [&] { return !in_error(qp); });
    check_peer(peer);
  }
}

void VerbsTransport::quiet(int src_pe) {
  PeState& pe = pe_state(src_pe);
  std::lock_guard lock(pe.mutex);
  quiet_locked(pe, OperationDeadline(options_.op_timeout, doorbell_));
}

// Between jobs, after the abort was cleared: the caller's deadline alone ends it.
void VerbsTransport::flush_all(Deadline deadline) {
  for (auto& pe : pes_) {
    std::lock_guard lock(pe->mutex);
    quiet_locked(*pe, deadline);
  }
}

// Not only the peers connected yet: through a dead port or device nothing reaches any of them.
void VerbsTransport::mark_every_peer_down(const std::string& why) {
  spdlog::error("verbs: {}", why);
  for (int peer = 0; peer < nodes_; ++peer) {
    if (peer != node_) mark_down(peer, why, true);
  }
}

// The device's news: a port or device failure takes every peer down, a failed queue pair its
// own peer.
void VerbsTransport::take_async_events() {
  while (auto event = next_async_event(*device_)) {
    switch (event->reach) {
      case AsyncEvent::Reach::kEveryPeer:
        mark_every_peer_down(event->what);
        break;
      case AsyncEvent::Reach::kQueuePair:
        if (auto it = by_qpn_.find(event->qpn); it != by_qpn_.end()) {
          mark_down(it->second.first, event->what, false);
        }
        break;
      case AsyncEvent::Reach::kNone:
        spdlog::info("verbs: {}", event->what);
        break;
    }
  }
}

// The node's notifier: wakes the doorbell for notifying writes and reposts their receives,
// takes the device's asynchronous events, and with progress_thread drains idle PEs' send
// completions.
void VerbsTransport::notifier_loop() {
  // A descriptor that reports an error (the device was removed or reset) is polled no more:
  // every peer goes down, and the loop waits for its stop.
  int channel_fd = channel_->fd, async_fd = device_->context()->async_fd;
  for (;;) {
    pollfd fds[3] = {{channel_fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}, {async_fd, POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("verbs: notifier poll failed: {}", std::strerror(errno));
      return;
    }
    if (fds[1].revents & POLLIN) return;
    if (fds[2].revents & POLLIN) take_async_events();
    const short broken = POLLERR | POLLHUP | POLLNVAL;
    if ((fds[0].revents | fds[2].revents) & broken) {
      mark_every_peer_down("the device " + device_->name() +
                           " stopped answering (its event descriptor reports an error)");
      if (fds[0].revents & broken) channel_fd = -1;
      if (fds[2].revents & broken) async_fd = -1;
      continue;
    }
    if (!(fds[0].revents & POLLIN)) continue;
    ibv_cq* cq = nullptr;
    void* context = nullptr;
    if (ibv_get_cq_event(channel_, &cq, &context) != 0) continue;
    ibv_ack_cq_events(cq, 1);
    ibv_req_notify_cq(cq, 0);
    if (cq != recv_cq_) {  // a PE's send queue (progress_thread): drain it unless it is busy
      auto* pe = static_cast<PeState*>(context);
      std::unique_lock lock(pe->mutex, std::try_to_lock);
      while (lock && poll(*pe) > 0) {
      }
      continue;
    }
    bool ring = false;
    ibv_wc wcs[kPollBatch];
    for (int n; (n = ibv_poll_cq(recv_cq_, kPollBatch, wcs)) > 0;) {
      for (int i = 0; i < n; ++i) {
        auto it = by_qpn_.find(wcs[i].qp_num);
        if (it == by_qpn_.end()) continue;
        const auto [peer, qp] = it->second;
        if (wcs[i].status == IBV_WC_SUCCESS) {
          ring = true;
          try {
            qp->post_receive();
          } catch (const std::exception& e) {
            mark_down(peer, e.what(), false);
          }
        } else {
          {
            std::lock_guard lock(errored_mutex_);
            errored_qps_.insert(wcs[i].qp_num);
          }
          mark_down(peer,
                    "the queue pair to node " + std::to_string(peer) + " (QP " +
                        std::to_string(wcs[i].qp_num) + ") went into the error state (" +
                        ibv_wc_status_str(wcs[i].status) + ")",
                    false);
        }
      }
    }
    if (ring) doorbell_.ring();
  }
}

}  // namespace symmesh
