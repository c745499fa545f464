// symmesh submit barrier: barrier latency.
#include <cstdio>

#include "client/submit/submit_kind.h"

namespace symmesh {

SubmitKind barrier_kind() {
  return {
      .name = "barrier",
      .help = "barrier latency",
      .message = "barrier",
      .options =
          {
              {.flag = "--algo",
               .field = "algo",
               .help = "inter-node algorithm (default: the cluster's, symmeshd --barrier-algo)"},
              {.flag = "--k",
               .field = "k",
               .help = "radix of the kary algorithm, 2..16 (default: the cluster's)",
               .accepts = in_range(2, 16)},
              {.flag = "--iters",
               .field = "iters",
               .help = "timed barriers (1..100000)",
               .fallback = "1000",
               .accepts = in_range(1, 100000)},
          },
      .print = [](const wire::JobResult& result) {
        std::printf("job %llu  barrier %-13s %s  %u iters  median %.1f us  p99 %.1f us\n",
                    static_cast<unsigned long long>(result.job_id()), result.algo().c_str(),
                    shape_text(result).c_str(), result.iters(), result.p50_us(), result.p99_us());
      }};
}

}  // namespace symmesh
