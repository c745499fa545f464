// symmesh submit transport: put bandwidth, put_signal or signal latency between two nodes.
#include <cstdio>

#include "client/submit/submit_kind.h"
#include "common/units.h"

namespace symmesh {

SubmitKind transport_kind() {
  return {.name = "transport",
          .help = "put bandwidth, put_signal or signal latency between PE 0 and node 1's first PE",
          .message = "transport",
          .options =
              {
                  {.flag = "--op", .field = "op", .help = "what to measure", .required = true},
                  {.flag = "--bytes",
                   .field = "bytes",
                   .help = "bytes per put (KiB, MiB suffixes; signal-lat: 8, the signal word)",
                   .fallback = "8",
                   .size = true},
                  {.flag = "--window",
                   .field = "window",
                   .help = "put-bw: puts per timed iteration (1..4096)",
                   .fallback = "64",
                   .accepts = in_range(1, 4096)},
                  {.flag = "--iters",
                   .field = "iters",
                   .help = "timed iterations (1..100000)",
                   .fallback = "100",
                   .accepts = in_range(1, 100000)},
              },
          .print = [](const wire::JobResult& result) {
            const wire::TransportFigures& f = result.figures().transport();
            std::printf(
                "job %llu  %s %s over %s  %u iters  median %.1f us  p99 %.1f us  %.3f GB/s\n",
                static_cast<unsigned long long>(result.job_id()), result.op().c_str(),
                format_bytes(f.bytes()).c_str(), f.transport().c_str(), result.iters(),
                result.p50_us(), result.p99_us(), f.gbps());
          }};
}

}  // namespace symmesh
