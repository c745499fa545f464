// symmesh submit collective: a collective's time and bandwidth.
#include <cstdio>

#include "client/submit/submit_kind.h"
#include "common/units.h"

namespace symmesh {

SubmitKind collective_kind() {
  return {.name = "collective",
          .help = "a collective's time and bandwidth",
          .message = "collective",
          .options =
              {
                  {.flag = "--op", .field = "op", .help = "the collective", .required = true},
                  {.flag = "--bytes",
                   .field = "bytes",
                   .help = "each PE's input (KiB, MiB, GiB suffixes)",
                   .required = true,
                   .size = true},
                  {.flag = "--dtype", .field = "dtype", .help = "element type", .fallback = "f32"},
                  {.flag = "--algo",
                   .field = "algo",
                   .help = "ring, hier (or direct for alltoall); auto picks",
                   .fallback = "auto"},
                  {.flag = "--reduce",
                   .field = "reduce",
                   .help = "reduction (max: allreduce only)",
                   .fallback = "sum"},
                  {.flag = "--iters",
                   .field = "iters",
                   .help = "timed calls (1..100000)",
                   .fallback = "20",
                   .accepts = in_range(1, 100000)},
                  {.flag = "--verify",
                   .field = "verify",
                   .help = "check every PE's output against the reference"},
              },
          .print = [](const wire::JobResult& result) {
            const wire::CollectiveFigures& f = result.figures().collective();
            std::printf(
                "job %llu  %s %s %s (%s)  %u PEs  %u iters  median %.3f ms  algbw %.2f GB/s  "
                "busbw %.2f GB/s%s\n",
                static_cast<unsigned long long>(result.job_id()), result.op().c_str(),
                format_bytes(f.bytes()).c_str(), result.dtype().c_str(), result.algo().c_str(),
                result.pes(), result.iters(), result.median_s() * 1e3, f.algbw_gbps(),
                f.busbw_gbps(), verification(result).c_str());
          }};
}

}  // namespace symmesh
