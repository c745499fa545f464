// The sequential baselines: the GEMM over the whole problem (the fused operators' oneDNN tiles,
// on compute_threads threads), a barrier, then the runtime's collective (or the collective
// first, for allgather-matmul). The barrier keeps each phase's time its own: compute_s is the GEMM
// alone, comm_s the collective alone (what the fused figures call compute-only and comm-only).
#include <cstring>

#include "ops/fused/operator.h"
#include "ops/fused/tiles.h"
#include "ops/fused/workers.h"
#include "runtime/barrier.h"
#include "runtime/collectives.h"

namespace symmesh {
namespace {

class Sequential final : public FusedOperator {
 public:
  Sequential(Pe& pe, Gemm& gemm, const FusedOptions& options)
      : pe_(pe), gemm_(gemm), o_(options), split_(split_rows(options.m, pe.n_pes())) {
    const int n = pe.n_pes();
    const size_t padded = size_t(split_.rows_per_part) * n;  // rows, the split padded
    const size_t element = dtype_size(o_.dtype);
    switch (o_.op) {
      case FusedOp::kMatmulReduceScatter:
        src_ =
            fused_workspace(pe, padded * o_.n * sizeof(float), "sequential C (padded m x n f32)");
        dst_ = fused_workspace(pe, size_t(split_.rows_per_part) * o_.n * sizeof(float),
                               "sequential D (m/ranks x n f32)");
        break;
      case FusedOp::kGemmAllreduce:
        src_ = fused_workspace(pe, size_t(o_.m) * o_.n * sizeof(float), "sequential C (m x n f32)");
        dst_ =
            fused_workspace(pe, size_t(o_.m) * o_.n * sizeof(float), "sequential sum (m x n f32)");
        break;
      case FusedOp::kAllgatherMatmul:
        src_ = fused_workspace(pe, size_t(split_.rows_per_part) * o_.k * element,
                               "sequential shard (m/ranks x k)");
        dst_ = fused_workspace(pe, padded * o_.k * element, "sequential gather_out (padded m x k)");
        break;
    }
  }

  ~Sequential() override {
    pe_.free(dst_);
    pe_.free(src_);
  }

  RunFigures run(FusedTensors& t) override {
    const int n = pe_.n_pes();
    const size_t element = dtype_size(o_.dtype);
    const size_t padded = size_t(split_.rows_per_part) * n;
    Team& world = pe_.team_world();
    RunFigures figures;
    figures.flops = 2.0 * double(o_.m) * double(o_.n) * double(o_.k);
    barrier_all(pe_);
    const double start = now_seconds();
    double compute_end = 0, comm_start = 0;
    if (o_.op == FusedOp::kAllgatherMatmul) {
      const double cpu = process_cpu_seconds();
      std::copy(t.a.begin(), t.a.end(), static_cast<std::byte*>(src_));
      allgather(pe_, world, dst_, src_, size_t(split_.rows_per_part) * o_.k, o_.dtype,
                kDefaultCollAlgo);
      figures.comm_s = now_seconds() - start;
      figures.comm_cpu_s = process_cpu_seconds() - cpu;
      barrier_all(pe_);
      const double compute_start = now_seconds();
      multiply_tiled(gemm_, operands(dst_, t), o_.m, o_.n, o_.tile_m, o_.tile_n, t.c.data(),
                     o_.compute_threads);
      compute_end = now_seconds();
      figures.compute_s = compute_end - compute_start;
      figures.wire_bytes = uint64_t(n - 1) * split_.rows_per_part * o_.k * element;
    } else {
      float* c = static_cast<float*>(src_);
      multiply_tiled(gemm_, operands(t.a.data(), t), o_.m, o_.n, o_.tile_m, o_.tile_n, c,
                     o_.compute_threads);
      figures.compute_s = now_seconds() - start;
      barrier_all(pe_);
      comm_start = now_seconds();
      const double cpu = process_cpu_seconds();
      const float* result = static_cast<const float*>(dst_);
      if (o_.op == FusedOp::kMatmulReduceScatter) {
        reduce_scatter(pe_, world, dst_, src_, padded * o_.n, DType::kF32, ReduceOp::kSum,
                       kDefaultCollAlgo);
        std::copy(result, result + t.c.size(), t.c.begin());
        figures.wire_bytes = uint64_t(n - 1) * split_.rows_per_part * o_.n * sizeof(float);
      } else {
        allreduce(pe_, world, dst_, src_, size_t(o_.m) * o_.n, DType::kF32, ReduceOp::kSum,
                  kDefaultCollAlgo);
        std::copy(result, result + t.c.size(), t.c.begin());
        figures.wire_bytes = 2 * uint64_t(n - 1) * o_.m * o_.n * sizeof(float) / n;
      }
      compute_end = now_seconds();
      figures.comm_s = compute_end - comm_start;
      figures.comm_cpu_s = process_cpu_seconds() - cpu;
    }
    figures.total_s = compute_end - start;
    if (o_.op == FusedOp::kAllgatherMatmul) {
      std::memcpy(t.gather_out.data(), dst_, t.gather_out.size());
    }
    return figures;
  }

 private:
  GemmOperands operands(const void* a, const FusedTensors& t) const {
    return GemmOperands{o_.dtype, static_cast<const std::byte*>(a), o_.k, t.b.data(), o_.n, o_.k,
                        o_.tile_k};
  }

  Pe& pe_;
  Gemm& gemm_;
  const FusedOptions o_;
  const RowSplit split_;
  void* src_ = nullptr;
  void* dst_ = nullptr;
};

}  // namespace

std::unique_ptr<FusedOperator> make_sequential(Pe& pe, Gemm& gemm, const FusedOptions& options) {
  return std::make_unique<Sequential>(pe, gemm, options);
}

}  // namespace symmesh
