#include "ops/fused/options.h"

#include <algorithm>

#include "common/check_range.h"
#include "common/errors.h"

namespace symmesh {

void validate(const FusedOptions& o, int n_pes) {
  check_range("ranks", n_pes, 1, kMaxFusedPes, "PEs in the cluster");
  check_range("m", o.m, 1, kMaxFusedDim);
  check_range("n", o.n, 1, kMaxFusedDim);
  check_range("k", o.k, 1, kMaxFusedDim);
  check_range("tile_m", o.tile_m, 1, 4096);
  check_range("tile_n", o.tile_n, 1, 4096);
  check_range("tile_k", o.tile_k, 0, kMaxFusedDim, "0 means all of k");
  check_range("stages", o.stages, 1, 8);
  check_range("comm_interval", o.comm_interval, 1, 4096);
  check_range("subtile_m", o.subtile_m, 0, 4096, "0 means the whole tile");
  check_range("compute_threads", o.compute_threads, 1, 64);
  check_range("comm_threads", o.comm_threads, 1, 64);
}

int64_t gemm_allreduce_subtile_m(const FusedOptions& o) {
  return o.subtile_m == 0 ? o.tile_m : std::min(o.subtile_m, o.tile_m);
}

int64_t RowSplit::begin(int part) const {
  return std::min(total, part * rows_per_part);
}

int64_t RowSplit::end(int part) const {
  return std::min(total, (part + 1) * rows_per_part);
}

RowSplit split_rows(int64_t m, int parts) {
  return RowSplit{(m + parts - 1) / parts, m};
}

}  // namespace symmesh
