// MoE combine (DeepEP's hierarchical combine): brings the expert outputs of every dispatched token
// back to its home PE and reduces them, walking dispatch's paths backwards (DeepEP's handle).
//
// hier, two roles per channel on every PE, each a thread:
//  - forwarder: for each record it forwarded in dispatch from another node, in the same order,
//    reads the partial of every local PE that got the token (its experts' outputs, already
//    summed), in local-rank order, where that PE's experts wrote it: a node's PEs are threads
//    of one daemon, and each lends its rows to its node peers for the call (DeepEP's NVL
//    senders copy them into the forwarder's ring instead). It adds them in f32 and appends one
//    partial to the symmetric RDMA ring (per channel, per forwarding node) of the token's home
//    PE: the data, then the tail bumped with a remote atomic add (put_signal). A home PE has a
//    ring per other node.
//  - receiver: for each own token, in order, adds the partials of every node that held one of
//    its experts, in node order, the biases, and writes combined_x (in the tokens' type). For
//    its own node it takes the node's PEs' partials themselves, in local-rank order, read in
//    place: no forwarder sum and no ring for them.
// Heads go back lazily: every chunk consumed, and always before a wait, so a receiver never
// waits on a forwarder that waits on it. With chunks at most half a ring (validate()), a
// forwarder always finds room for a chunk once the receiver has caught up.
//
// flat, the baseline: every expert output goes straight to its token's home PE, one slot per
// (token, expert), and the home PE adds them in topk order.
//
// Partials travel in options.partial_dtype (bf16: rounded at the sender and, from another node,
// at its forwarder; f32: only the final rounding). Every sum is taken in a fixed order: bitwise
// deterministic.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/moe/dispatch.h"

namespace symmesh {

// The stand-in expert: expert e maps x to x * expert_scale(e), a multiple of 1/8 in [1, 2), so
// different experts give different outputs and a misrouted one is seen. The jobs and the tests
// run it; a combine given no expert rows computes it.
float expert_scale(int expert);
// The stand-in experts' outputs for the received tokens, what the node's PEs read: per token
// the sum over this PE's experts of it of (weight if topk weighting) * expert_scale * x, in f32,
// rounded to options.partial_dtype: [received][hidden].
std::vector<std::byte> expert_outputs(const MoeOptions& options, const DispatchResult& dispatched);

struct CombineResult {
  std::vector<std::byte> combined_x;         // [tokens][hidden] in options.x_dtype, or empty
                                             // when written to CombineInputs::out
  std::vector<float> combined_topk_weights;  // [tokens][topk]
  double seconds = 0;                        // this PE: from the opening barrier to its last token
  int64_t inter_node_bytes = 0;              // partials this PE put to PEs on other nodes
  int64_t intra_node_bytes = 0;              // partials moved between this PE and its node peers
};

// What a combine adds up, besides the other PEs' partials.
struct CombineInputs {
  // [received][hidden] in options.x_dtype: this PE's output row for each token it received
  // (the sum over its experts of the token), as DeepEP's combine takes it. Null: the stand-in
  // experts (expert_scale), computed before the timed part. Hier only.
  const void* expert_rows = nullptr;
  std::vector<const void*> biases;  // each [tokens][hidden] in options.x_dtype
  // [tokens][hidden] in options.x_dtype: where the combined tokens are written (every byte).
  // Null: into CombineResult::combined_x.
  void* out = nullptr;
};

// Collective over the PEs of the nodes taking part (options.active_nodes), after dispatch()
// with the same options and this PE's routing.
CombineResult combine(Pe& pe, const MoeOptions& options, const DispatchResult& dispatched,
                      const Routing& routing, const CombineInputs& inputs);
// The stand-in experts and options.biases bf16 tensors of [tokens][hidden], sizes checked.
CombineResult combine(Pe& pe, const MoeOptions& options, const DispatchResult& dispatched,
                      const Routing& routing, const std::vector<std::vector<uint16_t>>& biases);

}  // namespace symmesh
