// The verbs transport (libibverbs, RC queue pairs): remote memory is written and read by
// the RDMA device with no CPU at the target. Its parts, as every network transport's: the
// device (verbs/device.h) opens the RDMA device, a pair (verbs/pair.h) is one queue pair to a
// peer, the buffers (verbs/buffer.h) are the registered segment and bounce rings, the
// address (verbs/address.h) is what the bootstrap exchanges.
//
// Memory: the node's segment is registered once (local write, remote write, read and
// atomic); each PE has its own registered bounce ring that puts copy into, so a put returns
// as soon as its data is staged. Queue pairs: one per (local rank, peer node), paired with
// the same local rank on the peer; each PE posts only to its own and polls its own send
// completion queue, so no lock is shared between PEs.
//
// Operations: put = RDMA WRITE (split at the smaller of the device's max_msg_sz and a
// quarter of the bounce ring, or inlined when small); get = RDMA READ (an aligned 8-byte
// get is a fetch-add of 0, so it is atomic); atomics = ATOMIC_FETCH_AND_ADD. put_signal
// writes the data, then the signal on the same queue pair: SET as an 8-byte RDMA WRITE, ADD
// as a fetch-add. No fence is needed for that: an RC responder executes writes and atomics
// in the order posted (only a write after a read or atomic may pass it, and fence() waits
// those out). A SET signal is posted in one chain with the last piece of the data, so one
// doorbell (on soft-RoCE one system call) carries both; a put that throws (a full queue or
// bounce ring past its deadline, a failed post) may so have sent none of its last piece.
//
// Waking the target: nothing tells a CPU that RDMA wrote. A SET signal is sent as
// WRITE_WITH_IMM, and an ADD or atomic is chained with a zero-length WRITE_WITH_IMM, at most
// once per notify_interval per QP; the immediate's receive completion makes the target's
// notifier thread ring its doorbell, so a parked waiter wakes at once.
//
// Completions: every `signal_interval`-th request is signaled; quiet() signals the last one
// if needed and polls until every request the PE posted has completed.
//
// Failures: the first failed work completion names its status, opcode, peer node and QP;
// the peer is then marked down (the QP is never reused) and later flushed completions are
// only counted. The device's asynchronous events are read too (verbs/async_events.h): a port
// whose link went down takes every peer down at once, naming the port, rather than leaving
// requests to their deadline.
#pragma once

#include <array>
#include <atomic>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "transport/piece_cursor.h"
#include "transport/rdma.h"
#include "transport/transport.h"
#include "transport/verbs/address.h"
#include "transport/verbs/buffer.h"
#include "transport/verbs/device.h"
#include "transport/verbs/pair.h"
#include "transport/wait.h"

namespace symmesh {

class VerbsTransport final : public RdmaTransport {
 public:
  VerbsTransport(int node, int nodes, int ranks_per_node, SegmentView segment, Doorbell& doorbell,
                 VerbsOptions options);
  ~VerbsTransport() override;

  wire::VerbsInfo local_info() const override;
  // Connects every local rank's queue pair to `peer`.
  void connect(int peer, const wire::VerbsInfo& remote) override;
  bool connected(int peer) const override;
  std::string describe() const override { return device_->describe(); }
  // Waiters yield for notify_interval before they park (see VerbsOptions::notify_interval).
  void shape_wait_policy(WaitPolicy& policy) override;
  // DeviceAtomicsTransport on a device whose atomics are not atomic against the CPU's.
  std::unique_ptr<Transport> own_node_transport(Transport& shm, SegmentView segment,
                                                Doorbell& doorbell) override;
  const VerbsDevice& device() const { return *device_; }
  // Ensures everything this node posted has completed (between jobs).
  void flush_all(Deadline deadline) override;
  void shutdown() override;

  bool peer_up(int node) const override { return connected(node) && health_.up(node); }

  std::string_view name() const override { return "verbs"; }
  void put_gather(int src_pe, int node, uint64_t offset, std::span<const PutPiece> source,
                  const SignalUpdate* signal) override;
  void get(int src_pe, int node, uint64_t offset, void* out, size_t length) override;
  void atomic_add(int src_pe, int node, uint64_t offset, uint64_t value) override;
  uint64_t atomic_fetch_add(int src_pe, int node, uint64_t offset, uint64_t value) override;
  void fence(int src_pe) override;
  void quiet(int src_pe) override;

 private:
  struct Remote {
    uint64_t addr = 0;
    uint32_t rkey = 0;
    uint64_t length = 0;
    uint64_t max_message = 0;
    bool connected = false;
  };
  struct QpState {
    std::unique_ptr<VerbsPair> qp;
    uint64_t posted = 0;          // sequence numbers handed out
    uint64_t completed = 0;       // every request below this has completed
    uint64_t signaled_upto = 0;   // one past the last signaled request
    uint64_t unordered_upto = 0;  // one past the last read or atomic
    uint32_t unsignaled = 0;
    uint64_t flushed = 0;                // requests flushed after a failure
    std::vector<ibv_wr_opcode> opcodes;  // by sequence number modulo the send depth
    Clock::time_point notified{};        // when a wake-up was last sent
  };
  struct Staged {  // bounce ring space held by a posted request
    int peer;
    uint64_t seq;
    uint64_t ring_end;
  };
  struct PeState {
    std::mutex mutex;
    ibv_cq* cq = nullptr;
    std::unique_ptr<BounceBuffer> bounce;
    std::vector<QpState> qps;            // by node; qps[this node] loops back through the device
    std::unique_ptr<VerbsPair> loop_in;  // the far end of that loop
    std::deque<Staged> staged;
  };
  struct Request {
    Request(ibv_wr_opcode opcode, uint64_t remote_offset, const void* local, uint32_t length,
            uint64_t add = 0)
        : opcode(opcode), remote_offset(remote_offset), local(local), length(length), add(add) {}
    ibv_wr_opcode opcode;
    uint64_t remote_offset;
    const void* local;  // bounce memory, or the caller's when inlined
    uint32_t length;
    uint64_t add;
    bool inline_data = false;
    bool signaled = false;
    std::optional<uint64_t> ring_end;
  };

  static constexpr size_t kMaxChain = 2;
  static Request completion_marker();
  // A zero-length write with immediate: it wakes the target's waiters (see notify_interval).
  static Request wake_up();
  void connect_loop(PeState& pe, const QpLimits& limits);
  int local_rank_of(int src_pe) const;
  PeState& pe_state(int src_pe);
  // Throws PeerError when `node` is down, unless `draining` is a queue pair the notifier saw
  // fail (its requests all complete, the failed one first: worth waiting for).
  void check_peer(int node, const QpState* draining = nullptr) const;
  void check_range(int node, uint64_t offset, uint64_t length, bool word) const;
  // check_range at an operation's start, from `pe` (whose mutex the caller does not hold).
  void check_access(PeState& pe, int node, uint64_t offset, uint64_t length, bool word,
                    OperationDeadline& deadline);
  // True once the notifier saw `qp` go into the error state: every request still on it will
  // complete (the failed one first, with the cause, then the rest flushed).
  bool in_error(const QpState& qp) const;
  // With pe.mutex held, for a peer that is down: when pe's queue pair to it is in the error
  // state, polls until its requests have all completed, so the reason kept is the cause.
  void settle(PeState& pe, int node, OperationDeadline& deadline);
  // Every wait below takes the deadline of the operation it is part of, so one operation ends
  // within about one op_timeout however many pieces it is cut into: a node peer lending memory
  // to a put bounds its wait by that.
  // Posts `requests` (at most kMaxChain) as one chain of work requests, so one doorbell
  // carries them; returns the last one's sequence number.
  uint64_t post(PeState& pe, int peer, std::span<Request> requests, OperationDeadline& deadline);
  uint64_t post(PeState& pe, int peer, Request request, OperationDeadline& deadline);
  // Drains up to one batch of `pe`'s send completions; returns how many there were.
  int poll(PeState& pe);
  void wait_done(PeState& pe, int peer, uint64_t seq, const char* what,
                 OperationDeadline& deadline);
  // Bounce space for `bytes`; polls (and asks for completions) until some is returned.
  uint64_t stage(PeState& pe, int peer, uint64_t bytes, OperationDeadline& deadline);
  // True when `qp` sent no wake-up for notify_interval (post() notes when one is posted).
  bool wake_up_due(const QpState& qp) const;
  // For the length of one operation on `pe` (under its mutex): when the operation leaves by an
  // exception, the bounce space it staged for requests it never posted is taken back.
  class StagingScope {
   public:
    explicit StagingScope(PeState& pe) : pe_(pe) {}
    ~StagingScope();
    StagingScope(const StagingScope&) = delete;
    StagingScope& operator=(const StagingScope&) = delete;

   private:
    PeState& pe_;
    const int exceptions_ = std::uncaught_exceptions();
  };
  // Points `request` at the next `length` bytes of `data`: inlined when they fit and lie in one
  // piece, else copied into the bounce ring.
  void attach(PeState& pe, int node, Request& request, PieceCursor& data,
              OperationDeadline& deadline);
  // "op_timeout N ms", for the errors of a wait that reached its deadline.
  std::string timeout_text() const;
  struct Posted {
    uint64_t seq;
    uint64_t position;  // of the old value in the bounce ring
  };
  // A fetch-add whose old value lands in the bounce ring, chained with the write that wakes the
  // target when the add changes the word and the target is due a wake-up.
  Posted post_fetch_add(PeState& pe, int node, uint64_t offset, uint64_t value, bool signaled,
                        OperationDeadline& deadline);
  void quiet_locked(PeState& pe, OperationDeadline deadline);
  // `cause`: a failed completion that is not a flush (its reason replaces a flush's).
  void mark_down(int peer, const std::string& why, bool cause);
  void mark_every_peer_down(const std::string& why);
  void take_async_events();
  void notifier_loop();

  const int node_;
  const int nodes_;
  const int ranks_per_node_;
  const SegmentView segment_;
  Doorbell& doorbell_;
  const VerbsOptions options_;

  std::unique_ptr<VerbsDevice> device_;
  MemoryRegion segment_mr_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  std::vector<std::unique_ptr<PeState>> pes_;
  std::vector<Remote> remotes_;
  std::unordered_map<uint32_t, std::pair<int, VerbsPair*>> by_qpn_;  // qpn -> (peer, qp)

  mutable std::mutex errored_mutex_;
  std::unordered_set<uint32_t> errored_qps_;  // queue pair numbers the notifier saw fail

  int stop_fd_ = -1;
  std::thread notifier_;
};

}  // namespace symmesh
