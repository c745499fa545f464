// What a MoE dispatch or combine job asks for: the token and routing shape, how the
// combine weighs and rounds, and the channels, rings and chunks of the pipeline. validate()
// refuses what cannot run, naming the field and the allowed range.
#pragma once

#include <cstdint>
#include <string>

#include "api/op_limits.h"
#include "runtime/collectives/dtype.h"

namespace symmesh {

// What a MoE job can shrink when its buffers do not fit the symmetric heap.
inline constexpr const char* kMoeShrink =
    "the job (--tokens, --hidden, --chunk-tokens, --rdma-ring-tokens)";

// none: DeepEP's normal mode (expert outputs summed as they are, weights passed through);
// topk: each expert output scaled by its f32 gate weight before the first reduction.
// The values are wire::MoeWeighting's, whose words it takes (ops/enum_words.h), as MoeAlgo's.
enum class MoeWeighting { kNone = 1, kTopk = 2 };

// hier: one copy per destination node over the network, fanned out / reduced inside the node
// (DeepEP's hierarchical combine); flat: every PE talks to every PE directly (combine's
// baseline); low-latency: for decoding, one record per (token, node) to a landing PE there,
// read in place by the node's PEs, with no notify round, double-buffered (DeepEP's low-latency
// mode, ops/moe/low_latency.h).
enum class MoeAlgo { kHier = 1, kFlat = 2, kLowLatency = 3 };

struct MoeOptions {
  int64_t tokens = 0;  // per PE
  int64_t hidden = 0;  // elements per token, a multiple of 8 (rows of whole 16-byte blocks)
  DType x_dtype = DType::kBF16;  // the tokens' element type (f32, bf16, f16); combine's output's
  int topk = 0;
  int experts = 0;  // spread evenly: PE p holds experts [p * E/n, (p + 1) * E/n)
  MoeWeighting weighting = MoeWeighting::kTopk;
  int biases = 0;                      // 0, 1 or 2 bias tensors added by the receivers
  DType partial_dtype = DType::kBF16;  // what partial sums travel in: bf16 or f32
  MoeAlgo algo = MoeAlgo::kHier;
  // Defaults measured with bench/moe.sh on 2 cores: one channel (then three threads a PE) beat two,
  // and matched two with two threads a PE; 16-token chunks beat 4 (fewer tails and heads); rings
  // of 4 chunks.
  int channels = 1;               // threads per PE, each owning a contiguous range of tokens
  int64_t chunk_tokens = 16;      // tokens a sender moves before it publishes a tail
  int64_t rdma_ring_tokens = 64;  // per (channel, source node) symmetric RDMA ring
  // The nodes taking part, a bit per node; 0 (or every bit): all. The PEs of a node left out do
  // not call, and no token may be routed to their experts (ops/moe/active_nodes.h).
  uint64_t active_nodes = 0;
};

// The active_nodes mask that names every one of `nodes` nodes (all 64 bits from 64 nodes on).
inline uint64_t every_node(int nodes) {
  return nodes >= 64 ? ~uint64_t{0} : (uint64_t{1} << nodes) - 1;
}

// Throws InvalidArgument naming the first field out of range for the cluster's shape.
void validate(const MoeOptions& options, int nodes, int ranks_per_node);

inline int experts_per_pe(const MoeOptions& options, int n_pes) {
  return options.experts / n_pes;
}
inline int expert_pe(const MoeOptions& options, int n_pes, int expert) {
  return expert / experts_per_pe(options, n_pes);
}

}  // namespace symmesh
