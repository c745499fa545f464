#include "daemon/jobs/job.h"

#include <algorithm>
#include <cmath>

#include "common/errors.h"
#include "runtime/enum_words.h"

namespace symmesh {
namespace {

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, size_t(std::ceil(p * values.size())) - 1);
  return values[index];
}

}  // namespace

const JobKind& job_kind_of(const wire::JobSpec& spec) {
  switch (spec.kind_case()) {
    case wire::JobSpec::kBarrier:
      return barrier_job_kind();
    case wire::JobSpec::kCollective:
      return collective_job_kind();
    case wire::JobSpec::kTransport:
      return transport_job_kind();
    case wire::JobSpec::kMatmul:
      return matmul_job_kind();
    case wire::JobSpec::kMoe:
      return moe_job_kind();
    case wire::JobSpec::kSession:
      return session_job_kind();
    default:
      throw InvalidArgument(
          "job has no kind: barrier, collective, transport, matmul, dispatch, combine or session");
  }
}

void summarize_waits(const std::vector<double>& wait_by_peer_s,
                     const std::vector<double>& blocked_s, wire::JobResult& result) {
  *result.mutable_wait_by_peer_s() = {wait_by_peer_s.begin(), wait_by_peer_s.end()};
  *result.mutable_blocked_s() = {blocked_s.begin(), blocked_s.end()};
  double total = 0;
  for (double seconds : blocked_s) total += seconds;
  if (blocked_s.size() < 2 || total <= 0) return;
  const auto least = std::min_element(blocked_s.begin(), blocked_s.end());
  const double others = (total - *least) / double(blocked_s.size() - 1);
  result.set_straggler(uint32_t(least - blocked_s.begin()));
  result.set_straggler_share(others > 0 ? 1.0 - *least / others : 0.0);
}

void check_iterations(uint32_t iters, uint32_t max) {
  if (iters < 1 || iters > max) {
    throw InvalidArgument("--iters " + std::to_string(iters) + " is outside 1.." +
                          std::to_string(max));
  }
}

DType dtype_of(wire::DataType dtype, DType unset) {
  return wire::from_wire(dtype, unset, "dtype");
}

ReduceOp reduce_of(wire::Reduction op) {
  return wire::from_wire(op, ReduceOp::kSum, "reduction");
}

void check_job_spec(const wire::JobSpec& spec, const ClusterShape& shape) {
  job_kind_of(spec).check(spec, shape);
}

void summarize_job(const wire::JobSpec& spec, const ClusterShape& shape,
                   const std::vector<double>& iteration_s, wire::JobResult& result) {
  result.set_pes(shape.n_pes());
  result.set_nodes(shape.nodes);
  if (iteration_s.empty()) return;
  const double median = percentile(iteration_s, 0.5);
  const JobKind& kind = job_kind_of(spec);
  result.set_iters(static_cast<uint32_t>(iteration_s.size()));
  result.set_median_s(median);
  result.set_p50_us(median * 1e6);
  result.set_p99_us(percentile(iteration_s, 0.99) * 1e6);
  result.set_kind(kind.wire_kind(spec));
  kind.summarize(spec, shape, median, result);
}

}  // namespace symmesh
