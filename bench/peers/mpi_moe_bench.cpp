// The OpenMPI side of bench/moe.sh: the combine as MPI_Alltoallv plus a local reduction. Every
// rank has packed, per destination rank, the outputs of its experts (the same stand-in experts,
// bf16) for that rank's tokens, in (token, topk slot) order, before the timing; MPI_Alltoallv
// moves them; each rank adds, per token, its experts' outputs in topk order in f32 and rounds to
// bf16. Each iteration starts after an MPI_Barrier and is timed by its slowest rank; rank 0 prints
// the median in seconds.
//   mpirun -np 4 mpi_moe_bench TOKENS HIDDEN TOPK EXPERTS ITERS
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "jobs/moe/reference.h"
#include "mpi_timing.h"

int main(int argc, char** argv) {
  using namespace symmesh;
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 6) {
    if (rank == 0) std::fprintf(stderr, "usage: mpi_moe_bench TOKENS HIDDEN TOPK EXPERTS ITERS\n");
    MPI_Finalize();
    return 2;
  }
  MoeOptions o;
  o.tokens = std::stoll(argv[1]);
  o.hidden = std::stoll(argv[2]);
  o.topk = std::stoi(argv[3]);
  o.experts = std::stoi(argv[4]);
  const int iters = std::stoi(argv[5]);
  const RoutingSpec spec = parse_routing("uniform", 1);
  std::vector<Routing> routings;
  std::vector<std::vector<uint16_t>> tokens;
  for (int p = 0; p < size; ++p) {
    routings.push_back(make_routing(o, p, spec));
    tokens.push_back(moe_tokens(o, p, InputSpec{1, ""}));
  }
  const Routing& mine = routings[rank];
  std::vector<int> send_counts(size, 0), recv_counts(size, 0), send_at(size), recv_at(size);
  for (int p = 0; p < size; ++p) {
    for (int64_t t = 0; t < o.tokens; ++t) {
      for (int k = 0; k < o.topk; ++k) {
        if (expert_pe(o, size, routings[p].expert(t, k)) == rank) send_counts[p] += int(o.hidden);
        if (expert_pe(o, size, mine.expert(t, k)) == p) recv_counts[p] += int(o.hidden);
      }
    }
  }
  for (int p = 0, s = 0, r = 0; p < size; s += send_counts[p], r += recv_counts[p], ++p) {
    send_at[p] = s;
    recv_at[p] = r;
  }
  std::vector<uint16_t> send(send_at.back() + send_counts.back());
  std::vector<uint16_t> recv(recv_at.back() + recv_counts.back());
  std::vector<uint16_t> combined(size_t(o.tokens) * o.hidden);
  std::vector<float> value(o.hidden), sum(o.hidden);
  // The expert outputs, packed per home rank: computed once, outside the timing, as symmesh's
  // combines compute theirs before their timed part.
  {
    for (int p = 0; p < size; ++p) {
      size_t at = send_at[p];
      for (int64_t t = 0; t < o.tokens; ++t) {
        for (int k = 0; k < o.topk; ++k) {
          const int32_t expert = routings[p].expert(t, k);
          if (expert_pe(o, size, expert) != rank) continue;
          const float factor = expert_scale(expert) * routings[p].weight(t, k);
          for (int64_t h = 0; h < o.hidden; ++h) {
            value[h] = factor * bf16_to_f32(tokens[p][size_t(t) * o.hidden + h]);
          }
          store_from_f32(&send[at], value.data(), size_t(o.hidden), DType::kBF16);
          at += size_t(o.hidden);
        }
      }
    }
  }
  auto run = [&] {
    MPI_Alltoallv(send.data(), send_counts.data(), send_at.data(), MPI_UINT16_T, recv.data(),
                  recv_counts.data(), recv_at.data(), MPI_UINT16_T, MPI_COMM_WORLD);
    std::vector<size_t> next(recv_at.begin(), recv_at.end());
    for (int64_t t = 0; t < o.tokens; ++t) {
      std::fill(sum.begin(), sum.end(), 0.0f);
      for (int k = 0; k < o.topk; ++k) {
        const int from = expert_pe(o, size, mine.expert(t, k));
        accumulate(sum.data(), &recv[next[from]], size_t(o.hidden), DType::kBF16, ReduceOp::kSum);
        next[from] += size_t(o.hidden);
      }
      store_from_f32(&combined[size_t(t) * o.hidden], sum.data(), size_t(o.hidden), DType::kBF16);
    }
  };
  print_slowest_median(rank, iters, run);
  MPI_Finalize();
  return 0;
}
