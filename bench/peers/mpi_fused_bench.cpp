// The OpenMPI side of bench/fused.sh: the same GEMM as symmesh's baselines (oneDNN tiles of
// the default 256 x 512 through symmesh's Gemm, one thread per rank) on the same seeded inputs,
// then MPI_Reduce_scatter_block / MPI_Allreduce / MPI_Allgather (or the all-gather first, for
// allgather-matmul). Each iteration starts after an MPI_Barrier and is timed by its slowest rank;
// rank 0 prints the medians: total, compute and comm seconds.
//   mpirun -np 2 mpi_fused_bench OP M N K DTYPE ITERS
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "jobs/fused/inputs.h"
#include "ops/enum_words.h"
#include "ops/fused/operator.h"
#include "ops/fused/tiles.h"
#include "ops/gemm.h"

namespace {

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace symmesh;
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 7) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi_fused_bench OP M N K DTYPE ITERS\n");
    MPI_Finalize();
    return 2;
  }
  FusedOptions o;
  o.op = wire::parse_word<FusedOp>(argv[1], "op");
  o.m = std::stoll(argv[2]);
  o.n = std::stoll(argv[3]);
  o.k = std::stoll(argv[4]);
  o.dtype = wire::parse_word<DType>(argv[5], "dtype");
  const int iters = std::stoi(argv[6]);

  const RowSplit split = split_rows(o.m, size);
  const int64_t padded = split.rows_per_part * size;
  const size_t element = dtype_size(o.dtype);
  const InputSpec spec;
  std::vector<std::byte> a = input_a(o, size, rank, spec), b = input_b(o, spec);
  Gemm gemm;
  std::vector<float> c(size_t(padded) * o.n), out(c.size());
  std::vector<std::byte> shard(size_t(split.rows_per_part) * o.k * element);
  std::vector<std::byte> gathered(size_t(padded) * o.k * element);
  if (o.op == FusedOp::kAllgatherMatmul) std::memcpy(shard.data(), a.data(), a.size());
  auto compute = [&] {
    const std::byte* lhs = o.op == FusedOp::kAllgatherMatmul ? gathered.data() : a.data();
    const GemmOperands operands{o.dtype, lhs, o.k, b.data(), o.n, o.k, o.tile_k};
    multiply_tiled(gemm, operands, o.m, o.n, o.tile_m, o.tile_n, c.data(), 1);
  };
  auto communicate = [&] {
    const int block = int(split.rows_per_part * o.n);
    switch (o.op) {
      case FusedOp::kMatmulReduceScatter:
        MPI_Reduce_scatter_block(c.data(), out.data(), block, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case FusedOp::kGemmAllreduce:
        MPI_Allreduce(c.data(), out.data(), int(o.m * o.n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        break;
      case FusedOp::kAllgatherMatmul:
        MPI_Allgather(shard.data(), int(shard.size()), MPI_BYTE, gathered.data(), int(shard.size()),
                      MPI_BYTE, MPI_COMM_WORLD);
        break;
    }
  };
  std::vector<double> total(iters), compute_s(iters), comm_s(iters);
  for (int i = -1; i < iters; ++i) {  // -1: the warm-up
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    double first_end;
    if (o.op == FusedOp::kAllgatherMatmul) {
      communicate();
      first_end = MPI_Wtime();
      compute();
    } else {
      compute();
      first_end = MPI_Wtime();
      communicate();
    }
    const double end = MPI_Wtime();
    if (i < 0) continue;
    total[i] = end - start;
    const bool gather_first = o.op == FusedOp::kAllgatherMatmul;
    compute_s[i] = gather_first ? end - first_end : first_end - start;
    comm_s[i] = gather_first ? first_end - start : end - first_end;
  }
  std::vector<double> slowest(3 * iters), mine;
  mine.insert(mine.end(), total.begin(), total.end());
  mine.insert(mine.end(), compute_s.begin(), compute_s.end());
  mine.insert(mine.end(), comm_s.begin(), comm_s.end());
  MPI_Reduce(mine.data(), slowest.data(), 3 * iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    auto part = [&](int p) {
      return median({slowest.begin() + p * iters, slowest.begin() + (p + 1) * iters});
    };
    std::printf("%.9f %.9f %.9f\n", part(0), part(1), part(2));
  }
  MPI_Finalize();
  return 0;
}
