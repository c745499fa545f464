// The collective job: seeded inputs on every PE, a warm-up call, `iters` timed calls (each
// after a barrier, so all PEs start together), then an element-wise check of this PE's
// output against the reference computed from the same seeded inputs.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/errors.h"
#include "common/progress.h"
#include "daemon/jobs/job.h"
#include "jobs/drill.h"
#include "runtime/barrier.h"
#include "runtime/collectives.h"
#include "runtime/enum_words.h"
#include "wire/enum_text.h"

namespace symmesh {
namespace {

// Multiples of 1/8 in [-1, 1]: sums over up to 512 PEs are exact in f32, and up to 16 in
// the 16-bit types, so the check can demand exact results where the math is exact.
float input_value(uint64_t stream, size_t i) {
  return float(int((stream * 131 + i * 7) % 17) - 8) / 8.0f;
}

void fill(void* buffer, uint64_t stream, size_t count, DType dtype) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = input_value(stream, i);
  store_from_f32(buffer, values.data(), count, dtype);
}

struct Buffers {
  size_t src_count = 0;
  size_t dst_count = 0;
};

Buffers buffer_counts(wire::CollectiveOp op, size_t count, int n) {
  if (op == wire::COLLECTIVE_OP_ALLGATHER) return {count, count * n};
  if (op == wire::COLLECTIVE_OP_REDUCE_SCATTER) return {count, count / n + 1};
  return {count, count};
}

// The algorithm a collective job runs (auto resolved).
wire::CollectiveAlgo collective_algo(const wire::CollectiveJob& job) {
  if (job.op() == wire::COLLECTIVE_OP_ALLTOALL) return wire::COLLECTIVE_ALGO_DIRECT;
  if (job.algo() == wire::COLLECTIVE_ALGO_UNSPECIFIED || job.algo() == wire::COLLECTIVE_ALGO_AUTO) {
    return wire::to_wire(kDefaultCollAlgo);
  }
  return job.algo();
}

DType collective_dtype(const wire::CollectiveJob& job) {
  return dtype_of(job.dtype(), DType::kF32);
}

PeJobOutcome run_collective(Pe& pe, const wire::CollectiveJob& job) {
  const DType dtype = collective_dtype(job);
  const ReduceOp reduce = reduce_of(job.reduce());
  const int n = pe.n_pes();
  const int me = pe.my_pe();
  const wire::CollectiveAlgo wire_algo = collective_algo(job);
  // All-to-all has one algorithm (direct puts) and takes none; the others take ring or hier.
  const CollAlgo algo = wire_algo == wire::COLLECTIVE_ALGO_DIRECT
                            ? kDefaultCollAlgo
                            : wire::from_wire(wire_algo, kDefaultCollAlgo, "collective algorithm");
  const size_t element = dtype_size(dtype);
  const size_t count = job.bytes() / element;
  const Buffers sizes = buffer_counts(job.op(), count, n);
  auto* src = static_cast<std::byte*>(pe.malloc(sizes.src_count * element));
  auto* dst = static_cast<std::byte*>(pe.malloc(sizes.dst_count * element));
  const size_t block = count / n;  // alltoall
  if (job.op() == wire::COLLECTIVE_OP_ALLTOALL) {
    for (int j = 0; j < n; ++j) fill(src + j * block * element, uint64_t(me) * n + j, block, dtype);
  } else {
    fill(src, me, count, dtype);
  }
  Team& world = pe.team_world();
  const std::string op_name = wire::enum_text(job.op());  // the per-call histogram's op
  auto call = [&] {
    const CountedCall counted(pe.peer_waits(), op_name);
    switch (job.op()) {
      case wire::COLLECTIVE_OP_ALLREDUCE:
        return allreduce(pe, world, dst, src, count, dtype, reduce, algo);
      case wire::COLLECTIVE_OP_REDUCE_SCATTER:
        return reduce_scatter(pe, world, dst, src, count, dtype, reduce, algo);
      case wire::COLLECTIVE_OP_ALLGATHER:
        return allgather(pe, world, dst, src, count, dtype, algo);
      default:
        return alltoall(pe, world, dst, src, block, dtype);
    }
  };
  PeJobOutcome outcome;
  call();  // warm-up
  progress::set_total(job.iters());
  for (uint32_t i = 0; i < job.iters(); ++i) {
    barrier_all(pe);
    const auto start = Clock::now();
    drill_before_call(pe.my_pe());
    call();
    outcome.iteration_s.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    progress::step();
  }
  if (job.verify()) {
    // Expected values, element by element, for this PE's output.
    auto expected = [&](size_t i) -> float {
      if (job.op() == wire::COLLECTIVE_OP_ALLGATHER) return input_value(i / count, i % count);
      if (job.op() == wire::COLLECTIVE_OP_ALLTOALL) {
        return input_value(uint64_t(i / block) * n + me, i % block);
      }
      const size_t at = job.op() == wire::COLLECTIVE_OP_REDUCE_SCATTER ? count * me / n + i : i;
      float value = input_value(0, at);
      for (int p = 1; p < n; ++p) {
        value = reduce_pair(value, input_value(p, at), reduce);
      }
      // The output is the f32 result rounded once to the dtype; so is the reference.
      uint32_t rounded = 0;
      float out = 0;
      store_from_f32(&rounded, &value, 1, dtype);
      load_f32(&out, &rounded, 1, dtype);
      return out;
    };
    size_t out_count = sizes.dst_count;
    if (job.op() == wire::COLLECTIVE_OP_REDUCE_SCATTER)
      out_count = count * (me + 1) / n - count * me / n;
    std::vector<float> got(out_count);
    load_f32(got.data(), dst, out_count, dtype);
    for (size_t i = 0; i < out_count; ++i) {
      outcome.max_abs_err = std::max(outcome.max_abs_err, double(std::fabs(got[i] - expected(i))));
    }
    outcome.verified = outcome.max_abs_err == 0.0;
  }
  barrier_all(pe);  // nobody frees a buffer a peer may still read
  pe.free(dst);
  pe.free(src);
  return outcome;
}

class CollectiveJobKind : public JobKind {
 public:
  wire::JobKind wire_kind(const wire::JobSpec&) const override { return wire::JOB_KIND_COLLECTIVE; }

  void check(const wire::JobSpec& spec, const ClusterShape& shape) const override {
    const auto& job = spec.collective();
    const int n = shape.n_pes();
    wire::check_enum(job.op(), "--op");
    wire::check_enum(job.dtype(), "--dtype", true);
    wire::check_enum(job.reduce(), "--reduce", true);
    wire::check_enum(job.algo(), "--algo", true);
    const DType dtype = collective_dtype(job);
    if (job.reduce() > wire::REDUCTION_SUM && job.op() != wire::COLLECTIVE_OP_ALLREDUCE) {
      throw InvalidArgument("--reduce " + wire::enum_text(job.reduce()) + " is only for allreduce");
    }
    const wire::CollectiveAlgo algo = collective_algo(job);
    if (job.op() == wire::COLLECTIVE_OP_ALLTOALL) {
      if (job.algo() != wire::COLLECTIVE_ALGO_UNSPECIFIED &&
          job.algo() != wire::COLLECTIVE_ALGO_AUTO && job.algo() != wire::COLLECTIVE_ALGO_DIRECT) {
        throw InvalidArgument("--algo '" + wire::enum_text(job.algo()) +
                              "': alltoall has one algorithm, direct (pairwise puts)");
      }
    } else if (algo == wire::COLLECTIVE_ALGO_DIRECT) {
      throw InvalidArgument("--algo direct is alltoall's; allowed here: ring, hier, auto");
    }
    const size_t element = dtype_size(dtype);
    if (job.bytes() < element || job.bytes() % element != 0) {
      throw InvalidArgument("--bytes " + std::to_string(job.bytes()) +
                            " must be a positive multiple of the " + wire::word(dtype) +
                            " element size (" + std::to_string(element) + " bytes)");
    }
    if (job.op() == wire::COLLECTIVE_OP_ALLTOALL && job.bytes() % (element * n) != 0) {
      throw InvalidArgument("--bytes " + std::to_string(job.bytes()) + " must divide into " +
                            std::to_string(n) + " equal blocks of " + wire::word(dtype) +
                            " elements for alltoall (a multiple of " + std::to_string(element * n) +
                            " bytes)");
    }
    check_iterations(job.iters(), 100000);
  }

  // A verified collective keeps the expected output and its input, in f32.
  uint64_t pe_host_bytes(const wire::JobSpec& spec, int pes) const override {
    const auto& job = spec.collective();
    if (!job.verify()) return 0;
    const size_t element = dtype_size(collective_dtype(job));
    return job.bytes() / element * 4 * (uint64_t(pes) + 1);
  }

  bool verify_requested(const wire::JobSpec& spec) const override {
    return spec.collective().verify();
  }

  PeJobOutcome run_on_pe(Pe& pe, const wire::JobSpec& spec) const override {
    return run_collective(pe, spec.collective());
  }

  void summarize(const wire::JobSpec& spec, const ClusterShape& shape, double median,
                 wire::JobResult& result) const override {
    const auto& job = spec.collective();
    const int n = shape.n_pes();
    result.set_op(wire::enum_text(job.op()));
    result.set_dtype(wire::word(collective_dtype(job)));
    result.set_algo(wire::enum_text(collective_algo(job)));
    wire::CollectiveFigures& f = *result.mutable_figures()->mutable_collective();
    f.set_bytes(job.bytes());
    // NCCL-tests: algbw = S / t with S the op's "size"; busbw = algbw x the op's factor.
    double size = static_cast<double>(job.bytes());
    double factor = double(n - 1) / n;
    if (job.op() == wire::COLLECTIVE_OP_ALLREDUCE) factor = 2.0 * (n - 1) / n;
    if (job.op() == wire::COLLECTIVE_OP_ALLGATHER) size *= n;  // SIZE is each PE's contribution
    if (median > 0) {
      f.set_algbw_gbps(size / median / 1e9);
      f.set_busbw_gbps(size / median / 1e9 * factor);
    }
  }
};

}  // namespace

const JobKind& collective_job_kind() {
  static const CollectiveJobKind kind;
  return kind;
}

}  // namespace symmesh
