// The MPI peers' timing, the same in each: one warm-up call, then `iters` calls each after an
// MPI_Barrier; an iteration's time is its slowest rank's (an MPI_Reduce max at the end), and
// rank 0 prints the median in seconds.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <vector>

template <class Run>
void print_slowest_median(int rank, int iters, Run run) {
  run();  // warm-up
  std::vector<double> times(iters), slowest(iters);
  for (int i = 0; i < iters; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    run();
    times[i] = MPI_Wtime() - start;
  }
  MPI_Reduce(times.data(), slowest.data(), iters, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    std::sort(slowest.begin(), slowest.end());
    std::printf("%.9f\n", slowest[slowest.size() / 2]);
  }
}
