// The session job: the cluster's PEs handed to processes attached to their daemons. Each PE's
// thread waits for the process attached to its local rank, then serves that process's request
// ring in order, making each call on its behalf (a barrier, a collective on tensors in the
// shared heap (broadcast among them), a symmetric allocation, a MoE dispatch or combine, normal or
// low-latency, a
// fused op on tensors in its staging area, or a one-sided get or put to another PE's heap),
// until the process detaches.
//
// A process that dies ends the session on every PE, naming it, and so does a call that fails:
// a collective one PE gave up on leaves its peers nowhere to go (a communicator error is
// fatal in NCCL for the same reason). Each process's library checks shapes before it asks, so
// a wrong call is refused there without ending anything.
#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "common/errors.h"
#include "daemon/attach/attached_pes.h"
#include "daemon/jobs/job.h"
#include "daemon/jobs/session_fused.h"
#include "daemon/jobs/session_moe.h"
#include "daemon/jobs/session_one_sided.h"
#include "ops/moe/active_nodes.h"
#include "runtime/barrier.h"
#include "runtime/collectives.h"

namespace symmesh {
namespace {

class SessionServer {
 public:
  SessionServer(Pe& pe, Attachment& attachment, const wire::SessionJob& job)
      : pe_(pe),
        attachment_(attachment),
        call_memory_bytes_(job.call_memory_bytes()),
        fused_threads_{std::max(1, int(job.compute_threads())),
                       std::max(1, int(job.comm_threads()))},
        moe_(pe, job.call_memory_bytes()) {}

  // Serves until the process detaches; each call's time in `outcome`.
  PeJobOutcome serve() {
    attach::Ring& ring = attachment_.ring();
    ring.serving.store(1, std::memory_order_release);
    PeJobOutcome outcome;
    for (uint32_t head = ring.completed.load(std::memory_order_acquire);; ++head) {
      wait_for_request(ring, head);
      if (ring.submitted.load(std::memory_order_acquire) - head > attach::kRingSlots) {
        throw PeerError(attachment_.describe(pe_.my_pe()) + " corrupted its request ring");
      }
      attach::Slot& slot = ring.slots[head % attach::kRingSlots];
      const attach::Request request = slot.request;  // read once: the process may rewrite it
      const auto start = Clock::now();
      std::exception_ptr failure;
      try {
        slot.completion.value2 = 0;
        slot.completion.value = execute(request, slot.completion);
        slot.completion.status = attach::Status::kOk;
      } catch (const InvalidArgument& e) {
        complete_with(slot.completion, attach::Status::kInvalid, e.what());
        failure = std::current_exception();
      } catch (const std::exception& e) {
        complete_with(slot.completion, attach::Status::kFailed, e.what());
        failure = std::current_exception();
      }
      slot.completion.staging_bytes = attachment_.staging().bytes();
      ring.completed.store(head + 1, std::memory_order_release);
      wake_shared(ring.completed);
      if (failure) std::rethrow_exception(failure);
      outcome.iteration_s.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      if (request.op == attach::Op::kDetach) return outcome;
    }
  }

 private:
  void wait_for_request(attach::Ring& ring, uint32_t head) {
    Doorbell& bell = pe_.node().doorbell();
    wait_for_change(ring.submitted, head, [&] {
      if (attachment_.gone()) {
        throw PeerError(attachment_.describe(pe_.my_pe()) + " exited without detaching");
      }
      if (attachment_.spoke()) {
        throw PeerError(attachment_.describe(pe_.my_pe()) +
                        " wrote on its attach connection after attaching, where nothing is "
                        "read: a protocol error (calls go through the request ring)");
      }
      if (bell.aborted()) throw AbortedError("the session ended: " + bell.abort_reason());
    });
  }

  static void complete_with(attach::Completion& completion, attach::Status status,
                            const std::string& message) {
    completion.status = status;
    std::strncpy(completion.message, message.c_str(), attach::kMessageBytes - 1);
    completion.message[attach::kMessageBytes - 1] = '\0';
  }

  // The part of a collective call every PE must pass alike (the rest zeroed), or nothing for a
  // call that is not checked: malloc and free keep their symmetry the caller's, as in
  // OpenSHMEM, so that an allocation costs no exchange; a barrier has nothing to disagree on.
  static std::optional<attach::Request> agreed_part(attach::Request r) {
    // Where each PE's tensors lie is its own.
    r.input_place = r.output_place = attach::Place::kStaging;
    r.dst_bytes = r.stage_at = r.stage_room = r.spill_at = 0;
    switch (r.op) {
      case attach::Op::kAllReduce:
      case attach::Op::kReduceScatter:
      case attach::Op::kAllGather:
      case attach::Op::kAllToAll:
      case attach::Op::kGemmAllReduce:
      case attach::Op::kMatmulReduceScatter:
      case attach::Op::kAllGatherMatmul:
      case attach::Op::kBroadcast:
        return r;
      // Each PE's tokens, the rows it received, and where its tensors lie are its own.
      case attach::Op::kDispatch:
      case attach::Op::kLowLatencyDispatch:
      case attach::Op::kCombine:
      case attach::Op::kLowLatencyCombine:
        r.count = r.src = r.dst = 0;
        return r;
      default:
        return std::nullopt;
    }
  }

  // FNV-1a over the request's bytes (a struct of whole words: no padding).
  static uint64_t digest(const attach::Request& r) {
    static_assert(std::has_unique_object_representations_v<attach::Request>);
    const auto* byte = reinterpret_cast<const unsigned char*>(&r);
    uint64_t hash = 14695981039346656037ull;
    for (size_t i = 0; i < sizeof(r); ++i) hash = (hash ^ byte[i]) * 1099511628211ull;
    return hash;
  }

  // Every PE's call must be the same collective on the same shape: one that is not would
  // write past a peer's smaller regions. All PEs refuse together, naming the first odd PE. A
  // MoE call that leaves nodes out is checked among the PEs taking part.
  void check_agreement(attach::Request agreed) {
    const ActiveNodes taking_part(pe_, moe_.agree_on(agreed));
    Team& team = taking_part.team();
    const std::vector<uint64_t> all = pe_.exchange(team, digest(agreed));
    for (size_t p = 0; p < all.size(); ++p) {
      if (all[p] == all[0]) continue;
      throw InvalidArgument("the PEs' calls differ: PE " + std::to_string(team.pe(int(p))) +
                            " made another call, or passed another shape, op or type, than PE " +
                            std::to_string(team.pe(0)) +
                            " (every PE makes the same collective calls in the same order)");
    }
  }

  // The calls among the ops, by their names in the per-call histogram (the CLI's words, as the
  // jobs' calls are named); nullptr for the rest.
  static const char* call_name(attach::Op op) {
    switch (op) {
      case attach::Op::kBarrier:
        return "barrier";
      case attach::Op::kAllReduce:
        return "allreduce";
      case attach::Op::kReduceScatter:
        return "reduce-scatter";
      case attach::Op::kAllGather:
        return "allgather";
      case attach::Op::kAllToAll:
        return "alltoall";
      case attach::Op::kBroadcast:
        return "broadcast";
      case attach::Op::kDispatch:
        return "dispatch";
      case attach::Op::kCombine:
        return "combine";
      case attach::Op::kLowLatencyDispatch:
        return "low-latency-dispatch";
      case attach::Op::kLowLatencyCombine:
        return "low-latency-combine";
      case attach::Op::kGemmAllReduce:
        return "gemm-allreduce";
      case attach::Op::kMatmulReduceScatter:
        return "matmul-reduce-scatter";
      case attach::Op::kAllGatherMatmul:
        return "allgather-matmul";
      default:
        return nullptr;
    }
  }

  uint64_t execute(const attach::Request& request, attach::Completion& completion) {
    attach::StagingArea& staging = attachment_.staging();
    std::optional<CountedCall> counted;
    if (const char* name = call_name(request.op)) counted.emplace(pe_.peer_waits(), name);
    if (const auto agreed = agreed_part(request)) check_agreement(*agreed);
    switch (request.op) {
      case attach::Op::kEmpty:
      case attach::Op::kDetach:
        return 0;
      case attach::Op::kBarrier:
        barrier_all(pe_);
        return 0;
      case attach::Op::kMalloc: {
        const uint64_t offset = pe_.slice_offset(pe_.malloc(request.count));
        allocations_.emplace(offset, request.count);
        return offset;
      }
      case attach::Op::kFree:
        free_allocation(request.dst);
        return 0;
      case attach::Op::kAllReduce:
      case attach::Op::kReduceScatter:
      case attach::Op::kAllGather:
      case attach::Op::kAllToAll:
        collective(request);
        return 0;
      case attach::Op::kStage:
        staging.grow(request.count, "the call");
        return 0;
      case attach::Op::kDispatch:
      case attach::Op::kLowLatencyDispatch: {
        const SessionMoe::Dispatched d = request.op == attach::Op::kDispatch
                                             ? moe_.dispatch(request, staging)
                                             : moe_.low_latency_dispatch(request, staging);
        completion.value2 = d.received;
        return d.handle;
      }
      case attach::Op::kCombine:
        moe_.combine(request, staging);
        return 0;
      case attach::Op::kLowLatencyCombine:
        moe_.low_latency_combine(request, staging);
        return 0;
      case attach::Op::kReleaseHandle:
        moe_.release(request.args[0]);
        return 0;
      case attach::Op::kGemmAllReduce:
      case attach::Op::kMatmulReduceScatter:
      case attach::Op::kAllGatherMatmul:
        return run_session_fused(pe_, request, staging, call_memory_bytes_, fused_threads_);
      case attach::Op::kGet:
      case attach::Op::kPutSignal:
        run_session_one_sided(pe_, request, allocations_);
        return 0;
      case attach::Op::kBroadcast:
        broadcast_bytes(request);
        return 0;
      case attach::Op::kWaitStats:
        return wait_stats(request, completion);
      default:
        throw InvalidArgument("request op " + std::to_string(uint32_t(request.op)) +
                              " is none of the ops 1.." + std::to_string(attach::kLastOp));
    }
  }

  uint64_t wait_stats(const attach::Request& request, attach::Completion& completion) const {
    if (request.args[0] >= uint64_t(pe_.n_pes())) {
      throw InvalidArgument("wait stats: PE " + std::to_string(request.args[0]) +
                            " is outside 0.." + std::to_string(pe_.n_pes() - 1));
    }
    completion.value2 = pe_.peer_waits().total_nanoseconds();
    return pe_.peer_waits().nanoseconds(int(request.args[0]));
  }

  // Only what this process's malloc answered: the daemon's own regions in the PE's heap (a
  // low-latency buffer, a call's rings) are not the process's to free.
  void free_allocation(uint64_t offset) {
    if (allocations_.erase(offset) == 0) {
      throw InvalidArgument("free: heap offset " + std::to_string(offset) +
                            " is not an allocation this process's malloc answered (or it was "
                            "freed already): allowed the offsets malloc returned");
    }
    pe_.free(pe_.heap_range(offset, 0));
  }

  void collective(const attach::Request& r) {
    wire::check_enum(wire::DataType(r.dtype), "dtype");
    wire::check_enum(wire::Reduction(r.reduce), "op", true);
    const DType dtype = dtype_of(wire::DataType(r.dtype), DType::kF32);
    const ReduceOp reduce = reduce_of(wire::Reduction(r.reduce));
    const size_t element = dtype_size(dtype);
    const uint64_t n = uint64_t(pe_.n_pes());
    if (r.count == 0 || r.count > (uint64_t{1} << 40) / element / n) {
      throw InvalidArgument("count " + std::to_string(r.count) + " is outside 1.." +
                            std::to_string((uint64_t{1} << 40) / element / n));
    }
    uint64_t src_count = r.count, dst_count = r.count;
    if (r.op == attach::Op::kReduceScatter) dst_count = r.count / n + 1;
    if (r.op == attach::Op::kAllGather) dst_count = r.count * n;
    if (r.op == attach::Op::kAllToAll) src_count = dst_count = r.count * n;
    // The collectives read and write elements where they are (as floats for f32). Sessions
    // check this before they send; a process that does not is refused here.
    if (r.src % element != 0 || r.dst % element != 0) {
      throw InvalidArgument("the input (heap offset " + std::to_string(r.src) +
                            ") and the output (heap offset " + std::to_string(r.dst) +
                            ") must be aligned to the " + std::to_string(element) +
                            "-byte element");
    }
    std::byte* src = pe_.heap_range(r.src, src_count * element);
    std::byte* dst = pe_.heap_range(r.dst, dst_count * element);
    const bool in_place = r.op == attach::Op::kAllReduce && src == dst;
    if (!in_place && src < dst + dst_count * element && dst < src + src_count * element) {
      throw InvalidArgument("the input and output overlap (only all_reduce works in place)");
    }
    Team& world = pe_.team_world();
    const CollAlgo algo = kDefaultCollAlgo;
    switch (r.op) {
      case attach::Op::kAllReduce:
        allreduce(pe_, world, dst, src, r.count, dtype, reduce, algo);
        break;
      case attach::Op::kReduceScatter:
        reduce_scatter(pe_, world, dst, src, r.count, dtype, reduce, algo);
        break;
      case attach::Op::kAllGather:
        allgather(pe_, world, dst, src, r.count, dtype, algo);
        break;
      default:
        alltoall(pe_, world, dst, src, r.count, dtype);
        break;
    }
  }

  void broadcast_bytes(const attach::Request& r) {
    if (r.args[0] >= uint64_t(pe_.n_pes())) {
      throw InvalidArgument("broadcast: root " + std::to_string(r.args[0]) + " is outside 0.." +
                            std::to_string(pe_.n_pes() - 1));
    }
    std::byte* src = pe_.heap_range(r.src, r.count);
    std::byte* dst = pe_.heap_range(r.dst, r.count);
    if (src != dst && src < dst + r.count && dst < src + r.count) {
      throw InvalidArgument(
          "broadcast: the input and output overlap (allowed: the same bytes, "
          "or apart)");
    }
    broadcast(pe_, pe_.team_world(), dst, src, r.count, int(r.args[0]));
  }

  Pe& pe_;
  Attachment& attachment_;
  const uint64_t call_memory_bytes_;  // the most a call may make the daemon hold (0: no cap)
  const FusedThreads fused_threads_;  // a fused call's, per PE: the root's split
  SessionMoe moe_;
  Allocations allocations_;  // what this process's malloc answered and it has not freed
};

std::chrono::seconds attach_timeout(const wire::SessionJob& job) {
  return std::chrono::seconds(job.attach_timeout_s() ? job.attach_timeout_s() : 60);
}

PeJobOutcome run_session(Pe& pe, const wire::SessionJob& job) {
  Doorbell& bell = pe.node().doorbell();
  auto attachment = attached_pes().wait_for(pe.local_rank(), deadline_after(attach_timeout(job)),
                                            [&] { return bell.aborted(); });
  if (!attachment) {
    if (bell.aborted()) throw AbortedError("the session ended: " + bell.abort_reason());
    throw TimeoutError("no process attached to local rank " + std::to_string(pe.local_rank()) +
                       " of node " + std::to_string(pe.my_node()) + " within " +
                       std::to_string(attach_timeout(job).count()) +
                       " s (start one per PE: symmesh launch -- CMD)");
  }
  // The slot stays the process's until it is gone (the attach server reaps it then).
  try {
    PeJobOutcome outcome = SessionServer(pe, *attachment, job).serve();
    attachment->close("the process detached");
    return outcome;
  } catch (const std::exception& e) {
    attachment->close(e.what());
    throw;
  }
}

class SessionJobKind : public JobKind {
 public:
  wire::JobKind wire_kind(const wire::JobSpec&) const override { return wire::JOB_KIND_SESSION; }

  void fill_defaults(wire::JobSpec& spec, const JobDefaults& defaults) const override {
    wire::SessionJob& job = *spec.mutable_session();
    job.set_compute_threads(uint32_t(defaults.fused_threads.compute));
    job.set_comm_threads(uint32_t(defaults.fused_threads.comm));
  }

  void check(const wire::JobSpec& spec, const ClusterShape&) const override {
    if (spec.session().attach_timeout_s() > 3600) {
      throw InvalidArgument("--attach-timeout " +
                            std::to_string(spec.session().attach_timeout_s()) +
                            " s is outside 0..3600 s");
    }
  }

  PeJobOutcome run_on_pe(Pe& pe, const wire::JobSpec& spec) const override {
    return run_session(pe, spec.session());
  }

  void summarize(const wire::JobSpec&, const ClusterShape&, double,
                 wire::JobResult&) const override {}
};

}  // namespace

const JobKind& session_job_kind() {
  static const SessionJobKind kind;
  return kind;
}

}  // namespace symmesh
