#include "ops/moe/layout.h"

namespace symmesh {

DispatchLayout dispatch_layout(const Routing& routing, const MoeOptions& o,
                               const ClusterShape& shape) {
  DispatchLayout l;
  l.tokens = routing.tokens;
  l.n_pes = shape.n_pes();
  l.nodes = shape.nodes;
  l.in_pe.assign(size_t(l.tokens) * l.n_pes, 0);
  l.in_node.assign(size_t(l.tokens) * l.nodes, 0);
  l.tokens_per_pe.assign(l.n_pes, 0);
  l.tokens_per_node.assign(l.nodes, 0);
  l.tokens_per_expert.assign(o.experts, 0);
  for (int64_t t = 0; t < l.tokens; ++t) {
    for (int k = 0; k < routing.topk; ++k) {
      const int32_t expert = routing.expert(t, k);
      if (expert < 0) continue;
      ++l.tokens_per_expert[expert];
      const int pe = expert_pe(o, l.n_pes, expert);
      l.in_pe[t * l.n_pes + pe] = 1;
      l.in_node[t * l.nodes + pe / shape.ranks_per_node] = 1;
    }
    for (int pe = 0; pe < l.n_pes; ++pe) l.tokens_per_pe[pe] += l.goes_to_pe(t, pe);
    for (int node = 0; node < l.nodes; ++node) l.tokens_per_node[node] += l.goes_to_node(t, node);
  }
  return l;
}

TokenRange channel_tokens(int64_t tokens, int channels, int channel) {
  return TokenRange{tokens * channel / channels, tokens * (channel + 1) / channels};
}

int64_t inter_node_records(const DispatchLayout& l, int my_node) {
  int64_t records = 0;
  for (int node = 0; node < l.nodes; ++node) {
    if (node != my_node) records += l.tokens_per_node[node];
  }
  return records;
}

int64_t hier_inter_node_bytes(const DispatchLayout& l, int my_node, int64_t hidden,
                              size_t element) {
  return inter_node_records(l, my_node) * hidden * int64_t(element);
}

int64_t flat_inter_node_bytes(const DispatchLayout& l, const MoeOptions& o,
                              const ClusterShape& shape, int my_node, size_t element) {
  int64_t records = 0;
  for (int expert = 0; expert < o.experts; ++expert) {
    if (expert_pe(o, l.n_pes, expert) / shape.ranks_per_node != my_node) {
      records += l.tokens_per_expert[expert];
    }
  }
  return records * o.hidden * int64_t(element);
}

}  // namespace symmesh
