// The references MoE dispatch and combine are verified against, and the inputs they share:
// each PE's tokens (bf16, generated from a seed) and the bias tensors; the stand-in expert every
// test and benchmark runs is the combine's (expert_scale, ops/moe/combine.h). Everything is
// computed from the routing alone, in f32 and in a fixed order, without moving data.
#pragma once

#include <cstdint>
#include <vector>

#include "jobs/inputs.h"
#include "ops/moe/combine.h"
#include "ops/moe/layout.h"

namespace symmesh {

// PE `pe`'s tokens: [tokens][hidden] bf16 bit patterns, uniform in [-1, 1), or read from
// <dir>/x_<pe>.npy (bf16 as '<u2' / '|V2', or '<f4' rounded).
std::vector<uint16_t> moe_tokens(const MoeOptions& options, int pe, const InputSpec& spec);
// Bias tensor `index` (0 or 1) of PE `pe`: [tokens][hidden] bf16, uniform in [-1/8, 1/8), or
// read from <dir>/bias_<index>_<pe>.npy.
std::vector<uint16_t> moe_bias(const MoeOptions& options, int pe, int index, const InputSpec& spec);

// What one PE's experts contribute to one token (DeepEP's per-rank combine input): the sum over
// the token's experts held by `pe`, in topk order, of (weight if topk weighting) * scale * x.
void expert_partial(const MoeOptions& options, const Routing& routing, int64_t token, int pe,
                    int n_pes, const uint16_t* x, float* out);

// The tokens PE `pe` receives, in the order dispatch delivers them: by source PE, then token.
std::vector<ReceivedToken> reference_dispatch(const MoeOptions& options,
                                              const std::vector<Routing>& routings,
                                              const ClusterShape& shape, int pe);

// The tokens PE `pe`'s local experts receive from a low-latency dispatch, in its order: per
// local expert, by source PE, then token ([local expert][i]).
std::vector<std::vector<ReceivedToken>> reference_low_latency_dispatch(
    const MoeOptions& options, const std::vector<Routing>& routings, int pe);

// PE `pe`'s combined_x: per token the sum of every expert's weighted output, plus the biases,
// in f32, rounded once to bf16.
std::vector<uint16_t> reference_combine(const MoeOptions& options, const Routing& routing,
                                        const std::vector<uint16_t>& x,
                                        const std::vector<std::vector<uint16_t>>& biases);

}  // namespace symmesh
