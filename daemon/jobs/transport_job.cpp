// Point-to-point transport figures between PE 0 and its partner: the first PE of node 1
// (PE 1 on a single node). Every other PE only joins the barriers, and reports zero time,
// so the slowest-PE aggregation yields the active pair's figures.
#include "common/errors.h"
#include "common/progress.h"
#include "daemon/jobs/job.h"
#include "runtime/barrier.h"

namespace symmesh {
namespace {

constexpr int kWarmup = 10;

int partner_of(Pe& pe) {
  return pe.node().nodes() > 1 ? pe.node().ranks_per_node() : 1;
}

// One timed iteration: `window` puts to the partner, then a quiet.
double put_window(Pe& pe, std::byte* remote, const std::byte* local, size_t bytes, uint32_t window,
                  int partner) {
  const auto start = Clock::now();
  for (uint32_t w = 0; w < window; ++w) pe.put(remote + w % 2 * bytes, local, bytes, partner);
  pe.quiet();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

PeJobOutcome run_transport(Pe& pe, const wire::TransportJob& job) {
  const int partner = partner_of(pe);
  const bool sender = pe.my_pe() == 0;
  const bool receiver = pe.my_pe() == partner;
  const size_t bytes = job.bytes();
  auto* buffer = static_cast<std::byte*>(pe.malloc(2 * bytes));  // two slots: puts alternate
  auto* signal = pe.malloc_array<uint64_t>(1);
  *signal = 0;
  std::vector<std::byte> local(bytes, std::byte{0x5a});
  PeJobOutcome outcome;
  outcome.iteration_s.assign(job.iters(), 0.0);
  progress::set_total(job.iters());
  barrier_all(pe);
  if (job.op() == wire::TRANSPORT_OP_PUT_BW) {
    const uint32_t window = job.window() ? job.window() : 64;
    if (sender) {
      for (int i = 0; i < kWarmup; ++i) put_window(pe, buffer, local.data(), bytes, 1, partner);
      for (auto& seconds : outcome.iteration_s) {
        seconds = put_window(pe, buffer, local.data(), bytes, window, partner);
        progress::step();
      }
    }
  } else {  // a ping-pong: the signal value is the round number, so no reset is needed
    // signal-lat writes the signal word alone: one remote write per hop, as ib_write_lat's.
    const size_t data_bytes = job.op() == wire::TRANSPORT_OP_SIGNAL_LAT ? 0 : bytes;
    const int total = kWarmup + int(job.iters());
    // One clock read per round: a round starts where the last ended (a read can cost
    // microseconds where the clock source is not the TSC).
    auto start = Clock::now();
    for (int round = 1; round <= total && (sender || receiver); ++round) {
      if (sender) {
        pe.put_signal(buffer, local.data(), data_bytes, signal, round, SignalOp::kSet, partner);
        pe.signal_wait_until(signal, Cmp::kGe, uint64_t(round));
      } else {
        pe.signal_wait_until(signal, Cmp::kGe, uint64_t(round));
        pe.put_signal(buffer, local.data(), data_bytes, signal, round, SignalOp::kSet, 0);
      }
      const auto end = Clock::now();
      const double half_trip = std::chrono::duration<double>(end - start).count() / 2;
      start = end;
      if (sender && round > kWarmup) {
        outcome.iteration_s[round - kWarmup - 1] = half_trip;
        progress::step();
      }
    }
    pe.quiet();
  }
  barrier_all(pe);
  // What the figures went over: the transport PE 0 uses to reach its partner.
  if (sender) {
    outcome.figures.mutable_transport()->set_transport(
        pe.node().transport_name(pe.node_of(partner)));
  }
  return outcome;
}

class TransportJobKind : public JobKind {
 public:
  wire::JobKind wire_kind(const wire::JobSpec&) const override { return wire::JOB_KIND_TRANSPORT; }

  void check(const wire::JobSpec& spec, const ClusterShape& shape) const override {
    const auto& job = spec.transport();
    wire::check_enum(job.op(), "--op");
    if (shape.n_pes() < 2) throw InvalidArgument("a transport job needs 2 PEs; the cluster has 1");
    if (job.bytes() < 1 || job.bytes() > (uint64_t{1} << 30)) {
      throw InvalidArgument("--bytes " + std::to_string(job.bytes()) + " is outside 1..1GiB");
    }
    if (job.op() == wire::TRANSPORT_OP_SIGNAL_LAT && job.bytes() != 8) {
      throw InvalidArgument("--bytes " + std::to_string(job.bytes()) +
                            ": signal-lat writes the 8-byte signal word alone; leave --bytes "
                            "at 8 (put-signal-lat sends data of any size before it)");
    }
    if (job.window() > 4096) {
      throw InvalidArgument("--window " + std::to_string(job.window()) + " is outside 1..4096");
    }
    check_iterations(job.iters(), 100000);
  }

  PeJobOutcome run_on_pe(Pe& pe, const wire::JobSpec& spec) const override {
    return run_transport(pe, spec.transport());
  }

  void summarize(const wire::JobSpec& spec, const ClusterShape&, double median,
                 wire::JobResult& result) const override {
    const auto& job = spec.transport();
    result.set_op(wire::enum_text(job.op()));
    wire::TransportFigures& f = *result.mutable_figures()->mutable_transport();
    f.set_bytes(job.bytes());
    const double moved =
        double(job.bytes()) *
        (job.op() == wire::TRANSPORT_OP_PUT_BW ? (job.window() ? job.window() : 64) : 1);
    if (median > 0) f.set_gbps(moved / median / 1e9);
  }
};

}  // namespace

const JobKind& transport_job_kind() {
  static const TransportJobKind kind;
  return kind;
}

}  // namespace symmesh
