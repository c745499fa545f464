// The interface the three fused operators and their sequential baselines share. An operator is
// built once per job (its symmetric workspace allocated, collectively, in the same order on
// every PE) and run any number of times; every PE makes the same calls. Each run starts with a
// barrier, so a run never reuses memory a peer is still reading from the previous one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ops/fused/options.h"
#include "ops/gemm.h"
#include "ops/roles/workspace.h"
#include "runtime/pe.h"

namespace symmesh {

// One PE's operands and results.
struct FusedTensors {
  std::vector<std::byte> a;           // matmul-reduce-scatter, gemm-allreduce: A_i, M x K;
                                      // allgather-matmul: this PE's shard of A (its rows x K)
  std::vector<std::byte> b;           // B, K x N, the same on every PE
  std::vector<float> c;               // matmul-reduce-scatter: this PE's rows of D; else C, M x N
  std::vector<std::byte> gather_out;  // allgather-matmul: AllGather(A), M x K
};

// What one run measured on one PE.
struct RunFigures {
  double total_s = 0;       // wall time of the run (after the opening barrier)
  double compute_s = 0;     // GEMM time (busy time per compute thread, in the fused mode)
  double comm_s = 0;        // collective time (sequential mode only)
  double comm_cpu_s = 0;    // CPU time this process spent during the collective (all threads)
  uint64_t wire_bytes = 0;  // bytes this PE sent to or read from other PEs
  double flops = 0;         // this PE's GEMM work
};

class FusedOperator {
 public:
  virtual ~FusedOperator() = default;
  virtual RunFigures run(FusedTensors& tensors) = 0;
};

// Resizes the outputs of `tensors` for this PE and checks the inputs' sizes.
void shape_tensors(const FusedOptions& options, const Pe& pe, FusedTensors& tensors);

std::unique_ptr<FusedOperator> make_fused(Pe& pe, Gemm& gemm, const FusedOptions& options);
std::unique_ptr<FusedOperator> make_sequential(Pe& pe, Gemm& gemm, const FusedOptions& options);

// Each operator's fused form (one file each).
std::unique_ptr<FusedOperator> make_matmul_reduce_scatter(Pe& pe, Gemm& gemm,
                                                          const FusedOptions& options);
std::unique_ptr<FusedOperator> make_gemm_allreduce(Pe& pe, Gemm& gemm, const FusedOptions& options);
std::unique_ptr<FusedOperator> make_allgather_matmul(Pe& pe, Gemm& gemm,
                                                     const FusedOptions& options);

// The operator's workspace (ops/roles/workspace.h): a heap too small names the tiles to shrink.
inline void* fused_workspace(Pe& pe, size_t bytes, const std::string& what) {
  return symmetric_zeroed(pe, bytes, what, "the tiles (--tile-m, --tile-n)");
}

}  // namespace symmesh
