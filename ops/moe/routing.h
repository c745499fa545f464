// The routing of every PE's tokens: for each token `topk` distinct expert ids (-1 for an unused
// slot, as DeepEP allows) and their f32 gate weights. Generated from a seed (uniform, or skewed:
// most tokens to a few experts, the load imbalance real models show) or read from .npy files.
// Any PE can produce any PE's routing, so a layout can be checked without moving data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/moe/options.h"
#include "runtime/cluster_shape.h"

namespace symmesh {

enum class RoutingKind { kUniform, kSkewed, kFile };

struct RoutingSpec {
  RoutingKind kind = RoutingKind::kUniform;
  std::string dir;  // kFile: topk_idx_<pe>.npy (int64 or int32) and topk_weights_<pe>.npy (f32)
  uint64_t seed = 1;
};

// "uniform", "skewed", or anything else as the directory of a FILE routing.
RoutingSpec parse_routing(const std::string& text, uint64_t seed);

struct Routing {
  int64_t tokens = 0;
  int topk = 0;
  std::vector<int32_t> experts;  // [tokens][topk]; -1: no expert in this slot
  std::vector<float> weights;    // [tokens][topk]
  int32_t expert(int64_t token, int k) const { return experts[token * topk + k]; }
  float weight(int64_t token, int k) const { return weights[token * topk + k]; }
};

// Throws InvalidArgument (naming `what`, the token and the id) unless every id is in
// [-1, experts) and no token names an expert twice.
void check_routing(const Routing& routing, int experts, const std::string& what);

// Every slot whose expert sits on a node options.active_nodes leaves out becomes -1 (what
// Python's mask_routing does by rank): a call that leaves nodes out sends them nothing.
void leave_out_nodes(Routing& routing, const MoeOptions& options, const ClusterShape& shape);

// PE `pe`'s routing. A file routing is checked: shape (tokens, topk), ids in [-1, experts),
// no id twice in a token; the error names the file, the token and the id.
Routing make_routing(const MoeOptions& options, int pe, const RoutingSpec& spec);

}  // namespace symmesh
