// What a fused operator job asks for: the operator, the problem (C = A x B with
// M x K times K x N), the element type, the tile and pipeline parameters, and how many threads
// compute and communicate. validate() refuses what cannot run, naming the field and the range.
#pragma once

#include <cstdint>
#include <string>

#include "api/op_limits.h"
#include "runtime/collectives/dtype.h"

namespace symmesh {

// The enums' values are their wire enums' numbers, whose words they take (ops/enum_words.h).
enum class FusedOp { kMatmulReduceScatter = 1, kGemmAllreduce = 2, kAllgatherMatmul = 3 };

// How matmul-reduce-scatter moves a finished stage to its owner: the owner reads it from the
// producer's workspace (pull, as CATCOC's CopyDirect::Get does) or the producer writes it into the
// owner's inbox (push).
enum class StageTransfer { kPull = 1, kPush = 2 };

struct FusedOptions {
  FusedOp op = FusedOp::kMatmulReduceScatter;
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::kBF16;
  // CPU tiles are larger than CATLASS's NPU tiles: on this machine's oneDNN brgemm a
  // 256 x 512 tile runs as fast as one GEMM over the whole problem (bench/fused.sh).
  int64_t tile_m = 256;
  int64_t tile_n = 512;
  int64_t tile_k = 0;     // 0: the whole K in one step
  int stages = 2;         // matmul-reduce-scatter: WORKSPACE_STAGES
  int comm_interval = 2;  // matmul-reduce-scatter: tiles per destination rank per stage
  int64_t subtile_m = 0;  // gemm-allreduce: rows per reduce/all-gather unit (0: the whole tile)
  int compute_threads = 1;
  int comm_threads = 1;
  StageTransfer transfer = StageTransfer::kPull;
};

inline constexpr int kMaxFusedPes = 16;

// The rows of gemm-allreduce's reduce and all-gather unit: subtile_m, the whole tile for 0, at
// most a tile.
int64_t gemm_allreduce_subtile_m(const FusedOptions& options);

// Throws InvalidArgument naming the first field out of range for `n_pes` PEs.
void validate(const FusedOptions& options, int n_pes);

// The rows a PE owns of an M-row matrix split over `parts` PEs: ceil(M / parts) each, the last
// ones shorter or empty (the padding of the split), so PE r's rows start at r * ceil(M / parts).
struct RowSplit {
  int64_t rows_per_part;  // nominal: ceil(M / parts)
  int64_t begin(int part) const;
  int64_t end(int part) const;
  int64_t rows(int part) const { return end(part) - begin(part); }
  int64_t total;
};
RowSplit split_rows(int64_t m, int parts);

}  // namespace symmesh
