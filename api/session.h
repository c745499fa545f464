// A process's handle on its PE: attach to the node's daemon, allocate tensors on the
// symmetric heap (mapped into this process, so calls on them copy nothing), and make calls
// the daemon carries out for this PE: barrier, collectives, MoE dispatch and combine, the
// fused ops. Calls are blocking and go through the PE's request ring (api/request_ring.h),
// not a socket; calls from several threads are taken one at a time.
//
// The heap is symmetric as in OpenSHMEM: every PE makes the same malloc calls in the same
// order, so an allocation has the same offset everywhere; collectives take heap tensors.
//
// Dispatch, combine and the fused ops take tensors anywhere in the process: PEs pass different
// sizes to them, so they travel through the PE's private staging area (a copy in, and one out
// unless lent), not the symmetric heap. The MoE calls' large tensors that lie on the heap are
// the exception: a
// dispatch's x and its recv_x room, a combine's rows and its output are used where they lie.
// And the MoE calls can lend their large output instead of copying it out: it stays in the
// staging area where the daemon wrote it, the caller's until it drops the StagingLoan.
//
// Errors: InvalidArgument for a call that is wrong (a pointer off the heap, a count of 0, an
// expert id out of range), checked here before anything is sent; Error (PeerError,
// TimeoutError) for one the cluster could not carry out, with the daemon's message.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "api/low_latency_halves.h"
#include "api/request_ring.h"
#include "api/staging_area.h"
#include "api/staging_loans.h"
#include "transport/channel.h"
#include "wire/jobs.pb.h"

namespace symmesh {

struct SessionPlace {
  int rank = 0;  // this PE, 0..world_size-1
  int world_size = 1;
  int local_rank = 0;  // on this node
  int local_size = 1;
  int node_rank = 0;
};

class Session;

// A dispatch, as DeepEP's handle: the paths its tokens took, which combine walks back. Held by
// the daemon until this is destroyed (or the session ends).
class DispatchHandle {
 public:
  ~DispatchHandle();
  DispatchHandle(const DispatchHandle&) = delete;
  DispatchHandle& operator=(const DispatchHandle&) = delete;

  int64_t tokens = 0;    // this PE's, as dispatched
  int64_t received = 0;  // tokens this PE received
  int64_t hidden = 0;
  int topk = 0;
  int experts = 0;
  wire::DataType dtype = wire::DATA_TYPE_UNSPECIFIED;
  int64_t max_tokens = 0;  // a low-latency dispatch's buffer size; 0 for a normal dispatch

 private:
  friend class Session;
  friend struct SessionProbe;
  DispatchHandle(Session* session, std::weak_ptr<void> alive, uint64_t id)
      : session_(session), alive_(std::move(alive)), id_(id) {}
  Session* session_;
  std::weak_ptr<void> alive_;  // expires with the session
  uint64_t id_;
};

// Where a dispatch writes what this PE received, once it knows how many: recv_x
// [received][hidden] in the tokens' type, recv_topk_idx [received][topk] (this PE's local expert
// index, or -1), recv_topk_weights [received][topk].
struct DispatchOutputs {
  void* x = nullptr;
  int64_t* topk_idx = nullptr;
  float* topk_weights = nullptr;
};

// Where a low-latency dispatch writes what this PE received: recv_x [received][hidden] packed
// by local expert, and recv_counts [local experts]: expert e's rows follow experts 0..e-1's.
struct LowLatencyOutputs {
  void* x = nullptr;
  int64_t* counts = nullptr;
};

// Where a dispatch may write recv_x in place: `rows` rows of the dispatch's hidden on this
// PE's symmetric heap. The received tokens go there when they fit, and an allocate() that
// answers that address for x gets them with nothing copied (one that answers other memory gets
// them copied from the room, and must not overlap it); else they come through the staging area
// into allocate's x. The sum of every PE's tokens always fits a normal dispatch (world_size x
// tokens when every PE passes as many). A room over the dispatch's own x is refused.
struct RecvRoom {
  void* x = nullptr;
  int64_t rows = 0;
};

class Session {
 public:
  // Attaches to the daemon's attach socket as `local_rank`, within `timeout`.
  static std::unique_ptr<Session> attach(const std::string& socket_path, int local_rank,
                                         std::chrono::milliseconds timeout);
  // Attaches as `symmesh launch` says (SYMMESH_ATTACH_SOCKET and SYMMESH_LOCAL_RANK), within
  // `timeout`.
  static std::unique_ptr<Session> attach_from_environment(
      std::chrono::milliseconds timeout = std::chrono::seconds(30));
  ~Session();  // detaches
  // Detaches now, handing the PE back for another process (the destructor does it otherwise).
  // The heap stays mapped until the Session goes; any later call is refused.
  void detach();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const SessionPlace& place() const { return place_; }

  // Symmetric heap.
  void* malloc(size_t bytes);
  void free(void* address);
  // Whether [address, address + bytes) lies in the part of this PE's slice that calls may name
  // (past the daemon's own state at its start).
  bool on_heap(const void* address, size_t bytes) const;
  // The bytes of this PE's slice that calls may name: the heap malloc hands out from.
  size_t heap_bytes() const { return slice_bytes_ - heap_start_; }

  void barrier();
  // In place: data[0, count) becomes the reduction over every PE, with no scratch and no
  // copy. If the call fails part way (a peer lost), data holds a mix of input and partial
  // sums: keep a copy where the input must survive a failure.
  void all_reduce(void* data, size_t count, wire::DataType dtype,
                  wire::Reduction op = wire::REDUCTION_SUM);
  // Out of place: dst[0, count) = the reduction over every PE of src (no scratch).
  void all_reduce(void* dst, const void* src, size_t count, wire::DataType dtype,
                  wire::Reduction op = wire::REDUCTION_SUM);
  // dst receives this PE's block of the reduction: elements [r*count/n, (r+1)*count/n).
  void reduce_scatter(void* dst, const void* src, size_t count, wire::DataType dtype,
                      wire::Reduction op = wire::REDUCTION_SUM);
  // dst[i*count, (i+1)*count) = PE i's src.
  void all_gather(void* dst, const void* src, size_t count, wire::DataType dtype);
  // dst[0, bytes) = PE root's src[0, bytes) on every PE (dst may be src).
  void broadcast(void* dst, const void* src, size_t bytes, int root);
  // src holds world_size blocks of `count` elements, block j for PE j; dst block i is PE i's.
  void all_to_all(void* dst, const void* src, size_t count, wire::DataType dtype);
  // A call that does nothing: the round trip through the daemon.
  void ping();
  // How long this PE's calls have waited since the session began, as DeepEP keeps its wait
  // statistics per rank: for each PE, the seconds this PE's waits blocked on a word only that
  // PE writes (its data, its signal, its entering a call), and all the seconds they blocked.
  // The PE every other PE's process reports the most for, or that reports little itself while
  // the others report much, is the slow one.
  struct WaitStats {
    std::vector<double> wait_by_peer_s;
    double blocked_s = 0;
  };
  WaitStats wait_stats();

  // One-sided, between this PE's heap and PE `pe`'s at the same (symmetric) addresses, for
  // messages between processes: neither waits for `pe`'s process, only for the wire.
  // dst[0, bytes) here = src[0, bytes) on `pe`; then, when `done` is given, the word `done` on
  // `pe` becomes `done_value` (its process learns the bytes were taken).
  void get(void* dst, const void* src, size_t bytes, int pe, const uint64_t* done = nullptr,
           uint64_t done_value = 0);
  // dst[0, bytes) on `pe` = src[0, bytes) here; then the word `signal` on `pe` becomes `value`,
  // never before the bytes land.
  void put_signal(void* dst, const void* src, size_t bytes, const uint64_t* signal, uint64_t value,
                  int pe);
  // Waits until one of `words` (on this PE's heap, where other PEs' puts land) holds another
  // value than `seen` (as many); returns its index, or -1 once `timeout` passed. It polls (a
  // short spin, then sleeps of up to 200 us), with no call to the daemon; throws PeerError once
  // the session ended.
  int wait_for_word_change(std::span<const uint64_t* const> words, std::span<const uint64_t> seen,
                           std::chrono::microseconds timeout) const;

  // MoE dispatch (DeepEP's semantics): PE r holds experts [r*E/W, (r+1)*E/W). Each of this PE's
  // `tokens` tokens (x [tokens][hidden]) goes, once, to every PE holding one of its experts
  // (topk_idx [tokens][topk], -1 for an unused slot; weights [tokens][topk]). `allocate` is
  // called with the count received and says where to write it. Received tokens are ordered by
  // source PE, then token: the same on every run. x on this PE's symmetric heap (made by malloc)
  // is read where it is; any other is copied in first. recv_x goes into `room` when it fits.
  // With `lent_x`, allocate may answer no x: recv_x is then lent (*lent_x, null for no rows),
  // unless it went into the room. `active_nodes` (a bit per node; 0: all) leaves the other nodes
  // out, as an elastic session serves without the nodes it lost: their processes do not call,
  // no token may go to their experts (mask the routing: -1), and the combine of the handle
  // leaves them out too. Every process that calls passes the same mask.
  std::shared_ptr<DispatchHandle> dispatch(
      const void* x, const int64_t* topk_idx, const float* topk_weights, int64_t tokens,
      int64_t hidden, int topk, int experts, wire::DataType dtype,
      const std::function<DispatchOutputs(int64_t received)>& allocate, RecvRoom room = {},
      std::shared_ptr<StagingLoan>* lent_x = nullptr, uint64_t active_nodes = 0);
  // MoE combine: out [tokens][hidden] = for each token dispatched from here, the sum over the
  // PEs that received it of their row in `rows` ([received][hidden]; typically the sum over
  // k of weight * expert(x)), plus bias [tokens][hidden] when given. Rows may be of any width
  // and type (a backward pass sends gradients back the same way). Hierarchical: one transfer
  // per node between nodes, reduced inside the node; every sum in a fixed order. Rows on this
  // PE's symmetric heap (made by malloc) are read where they are, and an `out` there (not over
  // the rows) is written where it is, partly so if the call fails; others are copied in first
  // and out after.
  void combine(const DispatchHandle& handle, const void* rows, int64_t hidden, wire::DataType dtype,
               const void* bias, void* out);
  // (out may be null only for no tokens.) The same, its result lent where the daemon wrote it
  // (null for no tokens):
  std::shared_ptr<StagingLoan> combine(const DispatchHandle& handle, const void* rows,
                                       int64_t hidden, wire::DataType dtype, const void* bias);

  // MoE low-latency dispatch (DeepEP's low_latency_dispatch, for decoding): the routing as for
  // dispatch, at most `max_tokens` tokens per PE (every PE passes the same max_tokens, hidden,
  // topk, experts and type: they size the session's buffer, made at the first call and again
  // when they change), each token delivered once per local expert it chose, packed by expert
  // (within an expert: by source PE, then token). Two dispatches may be in flight (two
  // micro-batches); each is combined, or its handle dropped, before a third. x, recv_x and
  // lent_x as for dispatch.
  std::shared_ptr<DispatchHandle> low_latency_dispatch(
      const void* x, const int64_t* topk_idx, const float* topk_weights, int64_t tokens,
      int64_t hidden, int topk, int experts, int64_t max_tokens, wire::DataType dtype,
      const std::function<LowLatencyOutputs(int64_t received)>& allocate, RecvRoom room = {},
      std::shared_ptr<StagingLoan>* lent_x = nullptr);
  // Once per low-latency dispatch: out [tokens][hidden] = per token the sum over its experts of
  // its topk weight times the expert's row (rows [received][hidden], in recv_x's order and the
  // dispatch's type), summed per PE in topk order, per node, then over nodes (the same bits on
  // every run). Rows and out on this PE's symmetric heap are used where they are, as for
  // combine.
  void low_latency_combine(const DispatchHandle& handle, const void* rows, void* out);
  // The same, its result lent where the daemon wrote it (null for no tokens).
  std::shared_ptr<StagingLoan> low_latency_combine(const DispatchHandle& handle, const void* rows);
  // How many lent outputs the callers still hold.
  size_t loans_outstanding() const { return loans_->outstanding(); }

  // The fused ops; a, b and the results in `dtype`, row-major; every PE passes the same shape and
  // mode: fused (the pipeline), sequential (the GEMM, then the collective), or auto (the first
  // call of a shape runs both a few times and the faster one serves every later call).
  // c [m][n] = the sum over PEs of their a [m][k] x b [k][n] (a row-parallel linear layer).
  void gemm_all_reduce(const void* a, const void* b, void* c, int64_t m, int64_t n, int64_t k,
                       wire::DataType dtype, wire::MatmulMode mode = wire::MATMUL_MODE_FUSED);
  // This PE's rows of the sum over PEs of a [m][k] x b [k][n]: rows from rank * ceil(m / W),
  // ceil(m / W) of them (fewer for the last PEs); c holds ceil(m / W) x n. Returns the count.
  int64_t matmul_reduce_scatter(const void* a, const void* b, void* c, int64_t m, int64_t n,
                                int64_t k, wire::DataType dtype,
                                wire::MatmulMode mode = wire::MATMUL_MODE_FUSED);
  // gathered [W*rows][k] = every PE's a [rows][k] in rank order; c [W*rows][n] = gathered x b.
  void all_gather_matmul(const void* a, const void* b, void* c, void* gathered, int64_t rows,
                         int64_t n, int64_t k, wire::DataType dtype,
                         wire::MatmulMode mode = wire::MATMUL_MODE_FUSED);

 private:
  friend class DispatchHandle;
  friend struct SessionProbe;  // tests: a request as a hostile process could write it
  Session() = default;
  // One call at a time (a mutex); first sends the releases queued by handles' destructors.
  uint64_t call(const attach::Request& request, uint64_t* value2 = nullptr);
  uint64_t call_locked(const attach::Request& request, uint64_t* value2);
  void queue_release(uint64_t handle);
  // Places a call's blocks in `request` (StagingLoans::place) and returns its inputs' block of
  // `in_bytes`, the area grown to hold it (the caller holds staging_mutex_).
  std::byte* stage(attach::Request& request, uint64_t in_bytes, uint64_t out_bytes);
  // A dispatch's tokens and routing, checked (`call` names the call in errors) and staged.
  struct MoeTokens {
    const void* x;
    const int64_t* topk_idx;
    const float* topk_weights;
    int64_t tokens, hidden;
    int topk, experts;
    wire::DataType dtype;
  };
  // Checks a dispatch's tokens and stages them, placing the call's blocks for `out_bytes` of
  // outputs expected: the routing into the staging area, x there too or, on this PE's heap,
  // left where it lies (`request` says which).
  void stage_tokens(const char* call, const MoeTokens& tokens, int64_t most_tokens,
                    uint64_t out_bytes, attach::Request& request);
  // The handle of a dispatch of `tokens` the daemon answered with `id` and `received` rows (a
  // PeerError when more than `most`); max_tokens 0 for a normal dispatch.
  std::shared_ptr<DispatchHandle> make_handle(uint64_t id, uint64_t received, uint64_t most,
                                              const MoeTokens& tokens, int64_t max_tokens);
  uint64_t fused(attach::Op op, const void* a, const void* b, void* c, void* gathered,
                 int64_t a_rows, int64_t c_rows, int64_t n, int64_t k, wire::DataType dtype,
                 wire::MatmulMode mode);
  // The heap offset of [address, address + bytes), checked on the heap and aligned to `element`.
  uint64_t offset_of(const void* address, size_t bytes, const char* what, size_t element = 1) const;
  // The heap offset of a MoE call's large tensor when it lies wholly on this PE's heap, aligned
  // to `element` (the daemon reads or writes it there); none when it goes through the staging
  // area.
  std::optional<uint64_t> heap_place(const void* data, size_t bytes, size_t element) const;
  // Says in `request` where a MoE call's large input is (a dispatch's x, a combine's rows):
  // where it lies when heap_place() finds it, else copied to `staged` in the staging area.
  void place_input(attach::Request& request, const void* data, size_t bytes, std::byte* staged,
                   size_t element) const;
  // Offers the daemon `room` for a dispatch's recv_x when it lies on this PE's heap (refused,
  // naming `caller`, when it overlaps the call's `tokens` of x there).
  void offer_room(attach::Request& request, const RecvRoom& room, int64_t tokens, int64_t hidden,
                  size_t element, const char* caller) const;
  // Copies a dispatch's recv_x of `bytes` to `to` from where the daemon wrote it: the offered
  // room when it fit, else `staged` (at that offset in the staging area); nothing when `to` is
  // that room. A `to` of null takes the rows not in the room as a loan into `lent`.
  void take_recv_x(const attach::Request& request, uint64_t staged, uint64_t bytes, void* to,
                   std::shared_ptr<StagingLoan>* lent);
  // Says in `request` where a combine's output `out` (`bytes`) goes: where it lies when
  // heap_place() finds it (refused, naming `caller`, when it overlaps the call's `rows_bytes` of
  // rows there), else the staging area.
  void place_output(attach::Request& request, uint64_t rows_bytes, const void* out, size_t bytes,
                    size_t element, const char* caller) const;
  // Makes a combine's call, then copies its output `out` (`bytes`) out of the staging area
  // after `in_bytes` of inputs unless place_output() put it where it lies; with out null, lends
  // it instead.
  std::shared_ptr<StagingLoan> call_into(const attach::Request& request, void* out, size_t bytes,
                                         uint64_t in_bytes);
  // The combines into `out`, or lent with out null.
  std::shared_ptr<StagingLoan> combine_into(const DispatchHandle& handle, const void* rows,
                                            int64_t hidden, wire::DataType dtype, const void* bias,
                                            void* out);
  std::shared_ptr<StagingLoan> low_latency_combine_into(const DispatchHandle& handle,
                                                        const void* rows, void* out);
  std::string closed_reason() const;
  // The request of a get or put_signal, checked (`call` names it in errors).
  attach::Request one_sided(attach::Op op, const char* call, void* dst, const void* src,
                            size_t bytes, int pe, const uint64_t* signal, uint64_t value) const;

  SessionPlace place_;
  std::unique_ptr<BlockingChannel> connection_;
  std::byte* segment_ = nullptr;
  size_t segment_bytes_ = 0;
  std::byte* slice_ = nullptr;
  size_t slice_bytes_ = 0;
  size_t heap_start_ = 0;  // the slice's first byte a call may name (the daemon's state before)
  attach::Ring* ring_ = nullptr;
  std::shared_ptr<attach::StagingArea> staging_;
  std::shared_ptr<StagingLoans> loans_;  // parts of it lent out
  uint64_t dispatch_outputs_ = 0;        // the last dispatch's outputs' bytes: the next's guess
  std::shared_ptr<void> alive_ = std::make_shared<int>(0);  // handles watch it
  // Held for a staged call's whole stage, call and copy out, so two threads' staged calls do
  // not overwrite (or remap) each other's staging area; taken before call_mutex_.
  std::mutex staging_mutex_;
  std::mutex call_mutex_;
  std::mutex releases_mutex_;  // never held while waiting for the daemon
  std::vector<uint64_t> pending_releases_;
  LowLatencyHalves low_latency_halves_;  // which dispatch holds each half of the daemon's buffer
  bool timed_out_ = false;
  std::chrono::milliseconds call_timeout_{std::chrono::minutes(10)};
  std::atomic<bool> detached_ = false;  // set under call_mutex_; read by waits without it
};

}  // namespace symmesh
