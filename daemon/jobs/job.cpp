#include "daemon/jobs/job.h"

#include <algorithm>
#include <cmath>

#include "common/units.h"
#include "runtime/barrier.h"
#include "runtime/collectives.h"

namespace symmesh {
namespace {

constexpr uint32_t kMaxIterations = 100000;

void check_iterations(uint32_t iters) {
  if (iters < 1 || iters > kMaxIterations) {
    throw InvalidArgument("--iters " + std::to_string(iters) + " is outside 1.." +
                          std::to_string(kMaxIterations));
  }
}

double percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  const size_t index = std::min(values.size() - 1, size_t(std::ceil(p * values.size())) - 1);
  return values[index];
}

}  // namespace

std::string collective_algo(const wire::CollectiveJob& job, int nodes, int ranks_per_node) {
  if (job.op() == "alltoall") return "direct";
  if (job.algo().empty() || job.algo() == "auto") {
    return nodes > 1 && ranks_per_node > 1 ? "hier" : "ring";
  }
  return job.algo();
}

void check_job_spec(const wire::JobSpec& spec, int nodes, int ranks_per_node) {
  const int n = nodes * ranks_per_node;
  if (spec.has_barrier()) {
    const auto& job = spec.barrier();
    if (!job.algo().empty()) parse_barrier_algo(job.algo());
    if (job.k() != 0 && (job.k() < 2 || job.k() > 16)) {
      throw InvalidArgument("--k " + std::to_string(job.k()) + " is outside 2..16");
    }
    check_iterations(job.iters());
    return;
  }
  if (spec.has_transport()) {
    const auto& job = spec.transport();
    if (job.op() != "put-bw" && job.op() != "put-signal-lat") {
      throw InvalidArgument("--op '" + job.op() + "' is not one of: put-bw, put-signal-lat");
    }
    if (n < 2) throw InvalidArgument("a transport job needs 2 PEs; the cluster has 1");
    if (job.bytes() < 1 || job.bytes() > (uint64_t{1} << 30)) {
      throw InvalidArgument("--bytes " + std::to_string(job.bytes()) + " is outside 1..1GiB");
    }
    if (job.window() > 4096) {
      throw InvalidArgument("--window " + std::to_string(job.window()) + " is outside 1..4096");
    }
    check_iterations(job.iters());
    return;
  }
  if (spec.has_matmul()) {
    check_matmul_job(spec.matmul(), n);
    check_iterations(spec.matmul().iters());
    return;
  }
  if (spec.has_moe()) {
    check_moe_job(spec.moe(), nodes, ranks_per_node);
    return;
  }
  if (!spec.has_collective()) {
    throw InvalidArgument("job has no kind: barrier, collective, transport or matmul");
  }
  const auto& job = spec.collective();
  static const char* kOps[] = {"allreduce", "reduce-scatter", "allgather", "alltoall"};
  if (std::find(std::begin(kOps), std::end(kOps), job.op()) == std::end(kOps)) {
    throw InvalidArgument("--op '" + job.op() +
                          "' is not one of: allreduce, reduce-scatter, allgather, alltoall");
  }
  const DType dtype = parse_dtype(job.dtype());
  const ReduceOp reduce = parse_reduce_op(job.reduce().empty() ? "sum" : job.reduce());
  if (reduce == ReduceOp::kMax && job.op() != "allreduce") {
    throw InvalidArgument("--reduce max is only for allreduce");
  }
  const std::string algo = collective_algo(job, nodes, ranks_per_node);
  if (job.op() == "alltoall") {
    if (!job.algo().empty() && job.algo() != "auto" && job.algo() != "direct") {
      throw InvalidArgument("--algo '" + job.algo() +
                            "': alltoall has one algorithm, direct (pairwise puts)");
    }
  } else if (algo != "ring" && algo != "hier") {
    throw InvalidArgument("--algo '" + job.algo() + "' is not one of: ring, hier, auto");
  }
  const size_t element = dtype_size(dtype);
  if (job.bytes() < element || job.bytes() % element != 0) {
    throw InvalidArgument("--bytes " + std::to_string(job.bytes()) +
                          " must be a positive multiple of the " + dtype_name(dtype) +
                          " element size (" + std::to_string(element) + " bytes)");
  }
  if (job.op() == "alltoall" && job.bytes() % (element * n) != 0) {
    throw InvalidArgument("--bytes " + std::to_string(job.bytes()) + " must divide into " +
                          std::to_string(n) + " equal blocks of " + dtype_name(dtype) +
                          " elements for alltoall (a multiple of " + std::to_string(element * n) +
                          " bytes)");
  }
  check_iterations(job.iters());
}

PeJobOutcome run_job_on_pe(Pe& pe, const wire::JobSpec& spec) {
  if (spec.has_barrier()) return run_barrier_job(pe, spec.barrier());
  if (spec.has_transport()) return run_transport_job(pe, spec.transport());
  if (spec.has_matmul()) return run_matmul_job(pe, spec.matmul());
  if (spec.has_moe()) return run_moe_job(pe, spec.moe());
  return run_collective_job(pe, spec.collective());
}

std::string job_kind(const wire::JobSpec& spec) {
  if (spec.has_barrier()) return "barrier";
  if (spec.has_moe()) return spec.moe().op();
  if (spec.has_matmul()) return "matmul";
  if (spec.has_transport()) return "transport";
  return "collective";
}

void summarize_job(const wire::JobSpec& spec, int nodes, int ranks_per_node,
                   const std::vector<double>& iteration_s, wire::JobResult& result) {
  const int n = nodes * ranks_per_node;
  result.set_pes(n);
  result.set_nodes(nodes);
  if (iteration_s.empty()) return;
  const double median = percentile(iteration_s, 0.5);
  result.set_iters(static_cast<uint32_t>(iteration_s.size()));
  result.set_median_s(median);
  result.set_p50_us(median * 1e6);
  result.set_p99_us(percentile(iteration_s, 0.99) * 1e6);
  result.set_kind(job_kind(spec));
  if (spec.has_barrier()) {
    result.set_algo(spec.barrier().algo());
    return;
  }
  if (spec.has_moe()) {
    const auto& job = spec.moe();
    result.set_op(job.op());
    result.set_algo(job.op() == "combine" ? job.algo() : "hier");
    result.set_iters(job.iters());
    return;
  }
  if (spec.has_matmul()) {
    const auto& job = spec.matmul();
    result.set_op(job.op());
    result.set_dtype(job.dtype());
    result.set_algo(job.mode());
    result.set_iters(job.iters());
    return;
  }
  if (spec.has_transport()) {
    const auto& job = spec.transport();
    result.set_op(job.op());
    result.set_bytes(job.bytes());
    const double moved =
        double(job.bytes()) * (job.op() == "put-bw" ? (job.window() ? job.window() : 64) : 1);
    if (median > 0) result.set_algbw_gbps(moved / median / 1e9);
    return;
  }
  const auto& job = spec.collective();
  result.set_op(job.op());
  result.set_dtype(job.dtype());
  result.set_bytes(job.bytes());
  result.set_algo(collective_algo(job, nodes, ranks_per_node));
  // NCCL-tests: algbw = S / t with S the op's "size"; busbw = algbw x the op's factor.
  double size = static_cast<double>(job.bytes());
  double factor = double(n - 1) / n;
  if (job.op() == "allreduce") factor = 2.0 * (n - 1) / n;
  if (job.op() == "allgather") size *= n;  // SIZE is each PE's contribution
  if (median > 0) {
    result.set_algbw_gbps(size / median / 1e9);
    result.set_busbw_gbps(size / median / 1e9 * factor);
  }
}

}  // namespace symmesh
