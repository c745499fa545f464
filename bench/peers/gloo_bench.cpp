// The Gloo side of bench/collectives.sh: one process per rank over Gloo's TCP transport,
// rendezvous through a FileStore. Each iteration starts after a Gloo barrier; the time of an
// iteration is the slowest rank's (an allreduce-max of the times at the end), and rank 0
// prints the median in seconds, as symmesh reports it.
//   gloo_bench RANK SIZE STORE_DIR allreduce|reduce-scatter|barrier BYTES ITERS
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_one.h>
#include <gloo/reduce_scatter.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: gloo_bench RANK SIZE STORE_DIR OP BYTES ITERS\n");
    return 2;
  }
  const int rank = std::stoi(argv[1]);
  const int size = std::stoi(argv[2]);
  const std::string op = argv[4];
  const size_t count = std::stoull(argv[5]) / sizeof(float);
  const int iters = std::stoi(argv[6]);

  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[3]);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->connectFullMesh(store, device);

  std::vector<float> data(std::max<size_t>(count, 1), 1.0f);
  std::vector<float*> pointers{data.data()};
  std::vector<int> receive(size);
  for (int r = 0; r < size; ++r) receive[r] = int(count * (r + 1) / size - count * r / size);
  gloo::AllreduceRingChunked<float> allreduce(context, pointers, int(count));
  gloo::ReduceScatterHalvingDoubling<float> reduce_scatter(context, pointers, int(count), receive);
  gloo::BarrierAllToOne barrier(context);
  auto run = [&] {
    if (op == "allreduce") allreduce.run();
    if (op == "reduce-scatter") reduce_scatter.run();
    if (op == "barrier") barrier.run();
  };

  run();  // warm-up
  std::vector<double> times(iters);
  for (int i = 0; i < iters; ++i) {
    barrier.run();
    const auto start = std::chrono::steady_clock::now();
    run();
    times[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  std::vector<double*> time_pointers{times.data()};
  gloo::AllreduceRing<double> slowest(context, time_pointers, iters,
                                      gloo::ReductionFunction<double>::max);
  slowest.run();
  if (rank == 0) {
    std::sort(times.begin(), times.end());
    std::printf("%.9f\n", times[times.size() / 2]);
  }
  return 0;
}
