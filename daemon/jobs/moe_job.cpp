// The MoE jobs: dispatch, or combine after an untimed dispatch, through jobs/moe/runner.
#include <algorithm>
#include <filesystem>

#include "common/errors.h"
#include "daemon/jobs/job.h"
#include "jobs/moe/runner.h"
#include "ops/enum_words.h"
#include "ops/moe/low_latency.h"

namespace symmesh {
namespace {

MoeJob moe_job(const wire::MoeJob& w) {
  MoeJob job;
  wire::check_enum(w.op(), "MoE op");
  wire::check_enum(w.weighting(), "--weighting", true);
  wire::check_enum(w.partial_dtype(), "--partial-dtype", true);
  wire::check_enum(w.algo(), "--algo", true);
  job.op = w.op() == wire::MOE_OP_DISPATCH ? MoeOp::kDispatch : MoeOp::kCombine;
  MoeOptions& o = job.options;
  o.tokens = int64_t(w.tokens());
  o.hidden = int64_t(w.hidden());
  o.topk = int(w.topk());
  o.experts = int(w.experts());
  o.weighting = wire::from_wire(w.weighting(), o.weighting, "--weighting");
  o.biases = int(w.biases());
  o.partial_dtype = dtype_of(w.partial_dtype(), o.partial_dtype);
  if (w.channels()) o.channels = int(w.channels());
  o.algo = wire::from_wire(w.algo(), o.algo, "--algo");
  if (w.chunk_tokens()) o.chunk_tokens = w.chunk_tokens();
  if (w.rdma_ring_tokens()) o.rdma_ring_tokens = w.rdma_ring_tokens();
  o.active_nodes = w.active_nodes();
  job.inputs.seed = w.seed() ? w.seed() : 1;
  job.inputs.dir = w.inputs();
  job.routing = parse_routing(w.routing().empty() ? "uniform" : w.routing(), job.inputs.seed);
  job.iters = int(w.iters());
  job.verify = w.verify();
  job.output_dir = w.output();
  return job;
}

PeJobOutcome run_moe(Pe& pe, const wire::MoeJob& w) {
  const MoeJob job = moe_job(w);
  if (!job.output_dir.empty()) std::filesystem::create_directories(job.output_dir);
  const MoeReport r = run_moe_job(pe, job);
  PeJobOutcome outcome;
  outcome.iteration_s = r.iteration_s;
  outcome.verified = r.verified;
  outcome.max_abs_err = r.max_abs_err;
  wire::MoeFigures& f = *outcome.figures.mutable_moe();
  f.set_tolerance(r.tolerance);
  f.set_deterministic(r.deterministic);
  f.set_tokens_per_s(r.tokens_per_s);
  f.set_algbw_gbps(r.algbw_gbps);
  f.set_inter_node_bytes(r.inter_node_bytes);
  f.set_intra_node_bytes(r.intra_node_bytes);
  f.set_flat_inter_node_bytes(r.flat_inter_node_bytes);
  f.set_weighting(wire::to_wire(job.options.weighting));
  f.set_partial_dtype(wire::to_wire(job.options.partial_dtype));
  return outcome;
}

// One low-latency PE: its tokens and two copies of the result; at most every PE's tokens once
// per local expert received (a skewed routing may send them all to one PE), held four times (the
// handle's x, the expert rows, and a dispatch job's first and last output); the staging area;
// with --verify the reference.
uint64_t low_latency_pe_bytes(const wire::MoeJob& job, int n_pes) {
  const uint64_t t = job.tokens(), h = job.hidden();
  const uint64_t per_pe = n_pes > 0 ? job.experts() / uint64_t(n_pes) : 0;
  const uint64_t received = uint64_t(n_pes) * t * std::min<uint64_t>(job.topk(), per_pe);
  uint64_t bytes = t * h * 2 * 3 + received * h * 2 * 4 +
                   t * (h * 2 + low_latency_header_bytes(int(job.topk())));
  if (job.verify()) {
    bytes += job.op() == wire::MOE_OP_DISPATCH ? uint64_t(n_pes) * t * h * 2 : t * h * 8;
  }
  return bytes;
}

// One PE of a MoE job: its tokens, biases and two copies of the result; the tokens it
// receives (about topk per token, at most one per PE) and their expert outputs; with
// --verify the reference (for dispatch, every PE's tokens).
uint64_t moe_pe_bytes(const wire::MoeJob& job, int n_pes) {
  if (job.algo() == wire::MOE_ALGO_LOW_LATENCY) return low_latency_pe_bytes(job, n_pes);
  const uint64_t t = job.tokens(), h = job.hidden();
  const uint64_t partial = job.partial_dtype() == wire::DATA_TYPE_F32 ? 4 : 2;
  const uint64_t copies = std::min<uint64_t>(job.topk(), uint64_t(n_pes));
  uint64_t bytes = t * h * 2 * (3 + job.biases()) + t * copies * h * (2 + partial);
  if (job.verify()) {
    bytes += job.op() == wire::MOE_OP_DISPATCH ? uint64_t(n_pes) * t * h * 2 + t * copies * h * 2
                                               : t * h * 8;
  }
  return bytes;
}

class MoeJobKind : public JobKind {
 public:
  wire::JobKind wire_kind(const wire::JobSpec& spec) const override {
    return spec.moe().op() == wire::MOE_OP_DISPATCH ? wire::JOB_KIND_DISPATCH
                                                    : wire::JOB_KIND_COMBINE;
  }

  void check(const wire::JobSpec& spec, const ClusterShape& shape) const override {
    check_iterations(spec.moe().iters(), 1000);
    validate(moe_job(spec.moe()), shape.nodes, shape.ranks_per_node);
  }

  std::vector<std::pair<std::string*, std::string>> paths(wire::JobSpec& spec) const override {
    auto* moe = spec.mutable_moe();
    std::vector<std::pair<std::string*, std::string>> paths{{moe->mutable_inputs(), "--inputs"},
                                                            {moe->mutable_output(), "--output"}};
    if (moe->routing() != "uniform" && moe->routing() != "skewed") {
      paths.emplace_back(moe->mutable_routing(), "--routing");
    }
    return paths;
  }

  uint64_t pe_host_bytes(const wire::JobSpec& spec, int pes) const override {
    return moe_pe_bytes(spec.moe(), pes);
  }

  bool verify_requested(const wire::JobSpec& spec) const override { return spec.moe().verify(); }

  PeJobOutcome run_on_pe(Pe& pe, const wire::JobSpec& spec) const override {
    return run_moe(pe, spec.moe());
  }

  void summarize(const wire::JobSpec& spec, const ClusterShape&, double,
                 wire::JobResult& result) const override {
    const auto& job = spec.moe();
    result.set_op(wire::enum_text(job.op()));
    result.set_algo(wire::word(moe_job(job).options.algo));
  }
};

}  // namespace

const JobKind& moe_job_kind() {
  static const MoeJobKind kind;
  return kind;
}

}  // namespace symmesh
