// Where each token goes (DeepEP's get_dispatch_layout, on the CPU): from a PE's routing, the PEs
// and nodes holding each token's experts, and the counts per PE, node and expert. The
// hierarchical dispatch sends a token once to each destination node (to the PE with the
// sender's local rank there), which fans it out to the destination PEs on its node; a token
// whose experts all live on one node crosses the network once, however many experts it has.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/moe/routing.h"
#include "runtime/cluster_shape.h"

namespace symmesh {

struct DispatchLayout {
  int64_t tokens = 0;
  int n_pes = 0;
  int nodes = 0;
  std::vector<uint8_t> in_pe;              // [tokens][n_pes]: the token goes to that PE
  std::vector<uint8_t> in_node;            // [tokens][nodes]: ... to some PE of that node
  std::vector<int64_t> tokens_per_pe;      // [n_pes]
  std::vector<int64_t> tokens_per_node;    // [nodes]
  std::vector<int64_t> tokens_per_expert;  // [experts]: (token, expert) pairs
  bool goes_to_pe(int64_t token, int pe) const { return in_pe[token * n_pes + pe] != 0; }
  bool goes_to_node(int64_t token, int node) const { return in_node[token * nodes + node] != 0; }
};

DispatchLayout dispatch_layout(const Routing& routing, const MoeOptions& options,
                               const ClusterShape& shape);

// The tokens of channel `channel` out of `channels`: [begin, end), contiguous, sizes differing
// by at most one.
struct TokenRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
TokenRange channel_tokens(int64_t tokens, int channels, int channel);

// Records that cross the network for this PE's tokens when each token goes once to every other
// node holding one of its experts (hierarchical and low-latency).
int64_t inter_node_records(const DispatchLayout& layout, int my_node);
// Bytes a combine moves between nodes for this PE's tokens: hierarchical, one partial per
// (token, destination node other than this PE's); flat, every expert output on another node
// sent straight home, one per (token, expert). `element` is the partial's size in bytes.
int64_t hier_inter_node_bytes(const DispatchLayout& layout, int my_node, int64_t hidden,
                              size_t element);
int64_t flat_inter_node_bytes(const DispatchLayout& layout, const MoeOptions& options,
                              const ClusterShape& shape, int my_node, size_t element);

}  // namespace symmesh
