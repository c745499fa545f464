// symmesh submit transport: put bandwidth or put_signal latency between two nodes.
#include "client/submit/submit_kind.h"

namespace symmesh {

SubmitKind transport_kind() {
  return {.name = "transport",
          .help = "put bandwidth or put_signal latency between PE 0 and node 1's first PE",
          .message = "transport",
          .options = {
              {.flag = "--op",
               .field = "op",
               .help = "what to measure",
               .accepts = one_of({"put-bw", "put-signal-lat"}),
               .required = true},
              {.flag = "--bytes",
               .field = "bytes",
               .help = "bytes per put (KiB, MiB suffixes)",
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
          }};
}

}  // namespace symmesh
