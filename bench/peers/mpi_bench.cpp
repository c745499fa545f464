// The OpenMPI side of bench/collectives.sh. Each iteration starts after an MPI_Barrier; the
// time of an iteration is the slowest rank's (MPI_Reduce max at the end); rank 0 prints the
// median in seconds.
//   mpirun -np 4 mpi_bench allreduce|reduce-scatter|barrier BYTES ITERS
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "mpi_timing.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 4) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi_bench OP BYTES ITERS\n");
    MPI_Finalize();
    return 2;
  }
  const std::string op = argv[1];
  const size_t count = std::stoull(argv[2]) / sizeof(float);
  const int iters = std::stoi(argv[3]);
  std::vector<float> in(std::max<size_t>(count, 1), 1.0f), out(in.size());
  auto run = [&] {
    if (op == "allreduce") {
      MPI_Allreduce(in.data(), out.data(), int(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else if (op == "reduce-scatter") {
      MPI_Reduce_scatter_block(in.data(), out.data(), int(count / size), MPI_FLOAT, MPI_SUM,
                               MPI_COMM_WORLD);
    } else {
      MPI_Barrier(MPI_COMM_WORLD);
    }
  };
  print_slowest_median(rank, iters, run);
  MPI_Finalize();
  return 0;
}
