#include "ops/fused/workers.h"

#include <vector>

#include "runtime/barrier.h"

namespace symmesh {

RunFigures run_pipelined(Pe& pe, const FusedOptions& o, const std::function<double(int)>& compute,
                         const std::function<void(int, CommPort&)>& comm,
                         const std::function<void()>& finish) {
  std::vector<double> busy(o.compute_threads, 0.0);
  CommPort port(pe);
  barrier_all(pe);
  const double start = now_seconds();
  run_roles(
      pe, o.compute_threads, [&](int i) { busy[i] = compute(i); }, o.comm_threads,
      [&](int j) { comm(j, port); });
  if (finish) finish();
  RunFigures figures;
  figures.total_s = now_seconds() - start;
  for (double b : busy) figures.compute_s += b / o.compute_threads;
  figures.wire_bytes = port.wire_bytes();
  figures.flops = 2.0 * double(o.m) * double(o.n) * double(o.k);
  return figures;
}

}  // namespace symmesh
