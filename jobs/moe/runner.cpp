#include "jobs/moe/runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "common/check_range.h"
#include "common/progress.h"
#include "common/trace.h"
#include "jobs/drill.h"
#include "jobs/moe/low_latency_job.h"
#include "jobs/moe/reference.h"
#include "ops/moe/active_nodes.h"
#include "ops/npy.h"
#include "ops/pe_stats.h"
#include "ops/roles/roles.h"
#include "runtime/barrier.h"

namespace symmesh {
namespace {

// The tokens a dispatch delivered must be exactly the reference's: their count, order and bits.
double dispatch_error(const MoeOptions& o, const DispatchResult& r,
                      const std::vector<ReceivedToken>& expected,
                      const std::vector<std::vector<uint16_t>>& all_x) {
  if (r.received != int64_t(expected.size())) return INFINITY;
  for (int64_t i = 0; i < r.received; ++i) {
    const ReceivedToken& want = expected[i];
    if (r.sources[i].source_pe != want.source_pe ||
        r.sources[i].source_token != want.source_token) {
      return INFINITY;
    }
    const uint16_t* sent = &all_x[want.source_pe][size_t(want.source_token) * o.hidden];
    if (std::memcmp(sent, &r.x[size_t(i) * o.hidden * 2], size_t(o.hidden) * 2) != 0) {
      return INFINITY;
    }
  }
  return 0;
}

bool takes_part(const MoeOptions& o, const ClusterShape& shape, int pe) {
  return ActiveNodes::takes_part(o.active_nodes, pe / shape.ranks_per_node);
}

// PE `pe`'s routing for the job: none for a PE of a node the job leaves out (it reads no
// inputs), and no expert on such a node for the others.
Routing job_routing(const MoeJob& job, const ClusterShape& shape, int pe) {
  const MoeOptions& o = job.options;
  if (!takes_part(o, shape, pe)) return Routing{0, o.topk, {}, {}};
  Routing routing = make_routing(o, pe, job.routing);
  leave_out_nodes(routing, o, shape);
  return routing;
}

// PE `pe`'s tokens: none when the job leaves its node out.
std::vector<uint16_t> job_tokens(const MoeJob& job, const ClusterShape& shape, int pe) {
  return takes_part(job.options, shape, pe) ? moe_tokens(job.options, pe, job.inputs)
                                            : std::vector<uint16_t>{};
}

}  // namespace

void validate(const MoeJob& job, int nodes, int ranks_per_node) {
  validate(job.options, nodes, ranks_per_node);
  if (job.op == MoeOp::kDispatch && job.options.algo == MoeAlgo::kFlat) {
    throw InvalidArgument(
        "dispatch has no flat algorithm (flat is combine's baseline): allowed hier, low-latency");
  }
  check_range("iters", job.iters, 1, 1000);
}

MoeReport run_moe_job(Pe& pe, const MoeJob& job) {
  const MoeOptions& o = job.options;
  validate(job, pe.node().nodes(), pe.node().ranks_per_node());
  const int me = pe.my_pe(), n = pe.n_pes();
  const ClusterShape shape{pe.node().nodes(), pe.node().ranks_per_node()};
  const Routing routing = job_routing(job, shape, me);
  // A PE of a node the job leaves out makes no call: it only joins the job's own figures.
  const bool taking_part = takes_part(o, shape, me);
  const std::vector<uint16_t> x = job_tokens(job, shape, me);
  std::vector<std::vector<uint16_t>> biases;
  for (int i = 0; i < o.biases && taking_part; ++i)
    biases.push_back(moe_bias(o, me, i, job.inputs));

  MoeReport report;
  std::vector<double> times;
  std::vector<std::byte> first, last;  // the output, bf16 (a hier dispatch's: dispatched.x)
  DispatchResult dispatched;
  int64_t inter = 0, intra = 0;
  const bool low_latency = o.algo == MoeAlgo::kLowLatency;
  const bool hier_dispatch = !low_latency && job.op == MoeOp::kDispatch;
  std::optional<LowLatencyCalls> calls;
  if (low_latency) {
    calls.emplace(pe, o, routing, x);
  } else if (job.op == MoeOp::kCombine && taking_part) {
    dispatched = dispatch(pe, o, x, routing);  // the handle
  }
  progress::set_total(uint32_t(job.iters));
  const char* const call_name = job.op == MoeOp::kCombine ? "combine" : "dispatch";
  for (int i = -1; i < job.iters; ++i) {  // -1: the warm-up
    const trace::Scope span(call_name, "iteration");
    drill_before_call(pe.my_pe());
    double seconds = 0;
    if (!taking_part) {
      if (hier_dispatch) barrier_all(pe);  // as the others start theirs
    } else if (low_latency) {              // LowLatencyCalls counts the timed call alone
      seconds = job.op == MoeOp::kCombine ? calls->combine(last) : calls->dispatch(last);
    } else if (job.op == MoeOp::kCombine) {
      const CountedCall counted(pe.peer_waits(), call_name);
      CombineResult r = combine(pe, o, dispatched, routing, biases);
      seconds = r.seconds;
      inter = r.inter_node_bytes;
      intra = r.intra_node_bytes;
      last = std::move(r.combined_x);
    } else {
      barrier_all(pe);  // every PE starts its call together, as in every other job
      const CountedCall counted(pe.peer_waits(), call_name);
      const double start = now_seconds();
      dispatched = dispatch(pe, o, x, routing, std::move(dispatched));
      seconds = now_seconds() - start;
    }
    // The slowest PE's time, taken before the untimed check below: every PE is done with the
    // call before any starts its check, so none takes a core from a PE still in its call.
    const double slowest = max_over_pes(pe, seconds);
    // A dispatch's rows are compared where they are: a copy of them is as slow as a dispatch.
    const std::vector<std::byte>& output = hier_dispatch ? dispatched.x : last;
    if (i < 0) {
      first = output;
      continue;
    }
    times.push_back(slowest);
    progress::step();
    // memcmp: std::vector<std::byte>'s == compares byte by byte, as slow as a dispatch.
    report.deterministic =
        report.deterministic && output.size() == first.size() &&
        (output.empty() || std::memcmp(output.data(), first.data(), output.size()) == 0);
  }
  report.deterministic = max_over_pes(pe, report.deterministic ? 0.0 : 1.0) == 0.0;
  report.median_s = median(times);
  report.iteration_s = times;
  const int64_t all_tokens = sum_over_pes(pe, routing.tokens);
  report.tokens_per_s = double(all_tokens) / report.median_s;
  report.algbw_gbps = double(all_tokens) * double(o.hidden) * 2 / report.median_s / 1e9;
  const DispatchLayout layout = dispatch_layout(routing, o, shape);
  const size_t element = job.op == MoeOp::kCombine ? dtype_size(o.partial_dtype) : 2;
  if (low_latency) {  // a record (its header and row) or a row per (token, other node)
    const size_t header = job.op == MoeOp::kDispatch ? low_latency_header_bytes(o.topk) : 0;
    inter = inter_node_records(layout, pe.my_node()) * int64_t(size_t(o.hidden) * 2 + header);
  } else if (job.op == MoeOp::kDispatch) {  // one per (token, other node)
    inter = hier_inter_node_bytes(layout, pe.my_node(), o.hidden, element);
  }
  report.inter_node_bytes = sum_over_pes(pe, inter);
  report.intra_node_bytes = sum_over_pes(pe, intra);
  report.flat_inter_node_bytes =
      sum_over_pes(pe, flat_inter_node_bytes(layout, o, shape, pe.my_node(), element));

  if (job.verify) {
    double error = 0, worst = 0;
    if (job.op == MoeOp::kCombine) {
      const auto expected =  // none for a PE left out: it combined nothing
          taking_part ? reference_combine(o, routing, x, biases) : std::vector<uint16_t>{};
      for (size_t i = 0; i < expected.size(); ++i) {
        const double want = bf16_to_f32(expected[i]), got = load_one(last.data(), i, DType::kBF16);
        const double diff = std::isnan(got) ? INFINITY : std::fabs(got - want);
        error = std::max(error, diff);
        worst = std::max(worst, diff / std::max(1.0, std::fabs(want)));
      }
      // bf16 partials are rounded at the sender (low-latency: each expert's row) and at the
      // forwarder (low-latency: the landing PE's node sum), then the result once.
      report.tolerance = o.partial_dtype == DType::kBF16 ? 3.0 / 128 : 1.0 / 128;
    } else {
      std::vector<Routing> routings;
      std::vector<std::vector<uint16_t>> all_x;
      for (int p = 0; p < n; ++p) {
        routings.push_back(job_routing(job, shape, p));
        all_x.push_back(job_tokens(job, shape, p));
      }
      error = worst =
          low_latency
              ? low_latency_dispatch_error(o, calls->last_dispatch(), last, me, routings, all_x)
              : dispatch_error(o, dispatched, reference_dispatch(o, routings, shape, me), all_x);
    }
    report.max_abs_err = max_over_pes(pe, error);
    report.verified = max_over_pes(pe, worst) <= report.tolerance;
  }
  if (!job.output_dir.empty() && job.op == MoeOp::kCombine) {
    write_npy(job.output_dir + "/combined_x_" + std::to_string(me) + ".npy", "<u2", last.data(),
              routing.tokens, o.hidden);
  }
  return report;
}

}  // namespace symmesh
