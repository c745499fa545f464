// symmesh submit collective: a collective's time and bandwidth.
#include "client/submit/submit_kind.h"

namespace symmesh {

SubmitKind collective_kind() {
  return {.name = "collective",
          .help = "a collective's time and bandwidth",
          .message = "collective",
          .options = {
              {.flag = "--op",
               .field = "op",
               .help = "the collective",
               .accepts = one_of({"allreduce", "reduce-scatter", "allgather", "alltoall"}),
               .required = true},
              {.flag = "--bytes",
               .field = "bytes",
               .help = "each PE's input (KiB, MiB, GiB suffixes)",
               .required = true,
               .size = true},
              {.flag = "--dtype",
               .field = "dtype",
               .help = "element type",
               .fallback = "f32",
               .accepts = one_of({"f32", "bf16", "f16"})},
              {.flag = "--algo",
               .field = "algo",
               .help = "ring, hier (or direct for alltoall); auto picks",
               .fallback = "auto",
               .accepts = one_of({"auto", "ring", "hier", "direct"})},
              {.flag = "--reduce",
               .field = "reduce",
               .help = "reduction (max: allreduce only)",
               .fallback = "sum",
               .accepts = one_of({"sum", "max"})},
              {.flag = "--iters",
               .field = "iters",
               .help = "timed calls (1..100000)",
               .fallback = "20",
               .accepts = in_range(1, 100000)},
              {.flag = "--verify",
               .field = "verify",
               .help = "check every PE's output against the reference"},
          }};
}

}  // namespace symmesh
