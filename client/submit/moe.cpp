// symmesh submit dispatch|combine: the MoE exchange. Both take the same options; combine runs
// its own dispatch first, untimed.
#include <cstdio>

#include "client/submit/submit_kind.h"
#include "common/units.h"

namespace symmesh {

SubmitKind moe_kind(const std::string& op) {
  return {
      .name = op,
      .help = op == "dispatch"
                  ? "MoE dispatch: every token to the PEs of its experts, one copy per node"
                  : "MoE combine (DeepEP's hierarchical combine): expert outputs back home, "
                    "reduced per node, then across nodes",
      .message = "moe",
      .fixed = {{"op", op}},
      .options =
          {
              {.flag = "--tokens",
               .field = "tokens",
               .help = "tokens per PE (0..1048576)",
               .accepts = in_range(0, uint64_t{1} << 20),
               .required = true},
              {.flag = "--hidden",
               .field = "hidden",
               .help = "bf16 elements per token, a multiple of 8",
               .required = true},
              {.flag = "--topk", .field = "topk", .help = "experts per token", .required = true},
              {.flag = "--experts",
               .field = "experts",
               .help = "experts, a multiple of the PE count",
               .required = true},
              {.flag = "--weighting",
               .field = "weighting",
               .help = "none (DeepEP normal mode) or topk",
               .fallback = "topk"},
              {.flag = "--bias",
               .field = "biases",
               .help = "bias tensors the receivers add (0..2)",
               .fallback = "0",
               .accepts = in_range(0, 2)},
              {.flag = "--partial-dtype",
               .field = "partial_dtype",
               .help = "what partial sums travel in",
               .fallback = "bf16",
               .accepts = one_of({"bf16", "f32"})},
              {.flag = "--channels",
               .field = "channels",
               .help = "threads per PE (1..64)",
               .fallback = "1",
               .accepts = in_range(1, 64)},
              {.flag = "--algo",
               .field = "algo",
               .help = "hier; flat (combine's baseline); low-latency (decoding: at most 8192 "
                       "tokens, topk weighting, no biases, bf16 partials)",
               .fallback = "hier"},
              {.flag = "--routing",
               .field = "routing",
               .help = "uniform, skewed, or a directory (inside the daemons' --data-dir) of "
                       "topk_idx_<pe>.npy and topk_weights_<pe>.npy",
               .fallback = "uniform"},
              {.flag = "--chunk-tokens",
               .field = "chunk_tokens",
               .help = "tokens per published tail (at most half a ring)",
               .fallback = "16"},
              {.flag = "--rdma-ring-tokens",
               .field = "rdma_ring_tokens",
               .help = "per (channel, node) RDMA ring",
               .fallback = "64"},
              {.flag = "--active-nodes",
               .field = "active_nodes",
               .help = "the nodes taking part, a bit per node (5: nodes 0 and 2; 0: all); the "
                       "others' PEs do not call, and no token goes to their experts (hier)",
               .fallback = "0"},
              {.flag = "--iters",
               .field = "iters",
               .help = "timed runs after a warm-up (1..1000)",
               .fallback = "5",
               .accepts = in_range(1, 1000)},
              {.flag = "--seed",
               .field = "seed",
               .help = "seed of the generated tokens and routing",
               .fallback = "1"},
              {.flag = "--verify",
               .field = "verify",
               .help = "check every PE's result against the reference"},
              {.flag = "--inputs",
               .field = "inputs",
               .help = "directory of x_<pe>.npy (and bias_<i>_<pe>.npy), read by every daemon, "
                       "inside its --data-dir"},
              {.flag = "--output",
               .field = "output",
               .help =
                   "combine: directory for combined_x_<pe>.npy, inside the daemons' --data-dir"},
          },
      .print = [](const wire::JobResult& result) {
        const wire::MoeFigures& f = result.figures().moe();
        std::printf(
            "job %llu  %s %s  %s  %u iters  median %.3f ms  p99 %.3f ms  %.0f tokens/s  "
            "%.3f GB/s  inter-node %s (flat %s)  %s%s\n",
            static_cast<unsigned long long>(result.job_id()),
            wire::enum_text(result.kind()).c_str(), result.algo().c_str(),
            shape_text(result).c_str(), result.iters(), result.median_s() * 1e3,
            result.p99_us() / 1e3, f.tokens_per_s(), f.algbw_gbps(),
            format_bytes(uint64_t(f.inter_node_bytes())).c_str(),
            format_bytes(uint64_t(f.flat_inter_node_bytes())).c_str(),
            f.deterministic() ? "deterministic" : "NOT DETERMINISTIC",
            verification(result).c_str());
      }};
}

}  // namespace symmesh
