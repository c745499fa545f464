// symmesh submit barrier: barrier latency.
#include "client/submit/submit_kind.h"

namespace symmesh {

SubmitKind barrier_kind() {
  return {.name = "barrier",
          .help = "barrier latency",
          .message = "barrier",
          .options = {
              {.flag = "--algo",
               .field = "algo",
               .help = "inter-node algorithm (default: the cluster's, symmeshd --barrier-algo)",
               .accepts = one_of({"dissemination", "kary", "pull"})},
              {.flag = "--k",
               .field = "k",
               .help = "radix of the kary algorithm, 2..16 (default: the cluster's)",
               .accepts = in_range(2, 16)},
              {.flag = "--iters",
               .field = "iters",
               .help = "timed barriers (1..100000)",
               .fallback = "1000",
               .accepts = in_range(1, 100000)},
          }};
}

}  // namespace symmesh
