#include "ops/fused/operator.h"
#include "ops/enum_words.h"

namespace symmesh {

void shape_tensors(const FusedOptions& o, const Pe& pe, FusedTensors& t) {
  const RowSplit split = split_rows(o.m, pe.n_pes());
  const size_t element = dtype_size(o.dtype);
  const bool sharded = o.op == FusedOp::kAllgatherMatmul;
  const int64_t a_rows = sharded ? split.rows(pe.my_pe()) : o.m;
  auto check = [&](const char* name, size_t have, int64_t rows, int64_t cols) {
    if (have == size_t(rows) * cols * element) return;
    throw InvalidArgument(std::string(name) + " of PE " + std::to_string(pe.my_pe()) + " holds " +
                          std::to_string(have) + " bytes; " + wire::word(o.op) + " needs " +
                          std::to_string(rows) + " x " + std::to_string(cols) + " " +
                          wire::word(o.dtype));
  };
  check("A", t.a.size(), a_rows, o.k);
  check("B", t.b.size(), o.k, o.n);
  const int64_t c_rows = o.op == FusedOp::kMatmulReduceScatter ? split.rows(pe.my_pe()) : o.m;
  t.c.assign(size_t(c_rows) * o.n, 0.0f);
  t.gather_out.assign(sharded ? size_t(o.m) * o.k * element : 0, std::byte{0});
}

std::unique_ptr<FusedOperator> make_fused(Pe& pe, Gemm& gemm, const FusedOptions& options) {
  switch (options.op) {
    case FusedOp::kMatmulReduceScatter:
      return make_matmul_reduce_scatter(pe, gemm, options);
    case FusedOp::kGemmAllreduce:
      return make_gemm_allreduce(pe, gemm, options);
    default:
      return make_allgather_matmul(pe, gemm, options);
  }
}

}  // namespace symmesh
