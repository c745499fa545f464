#include "ops/moe/options.h"

#include "common/check_range.h"
#include "common/errors.h"
#include "ops/enum_words.h"
#include "runtime/enum_words.h"

namespace symmesh {

namespace {

// The low-latency mode weighs each expert's rows by their gates where the expert is and sends
// node sums in the tokens' type: no biases, no other weighting, no f32 partials on the wire.
void validate_low_latency(const MoeOptions& o) {
  check_range("tokens", o.tokens, 0, kMaxLowLatencyTokens, "per PE with --algo low-latency");
  if (o.weighting != MoeWeighting::kTopk) {
    throw InvalidArgument(
        "weighting none is not available with --algo low-latency, whose combine always weighs "
        "by the gates: allowed topk");
  }
  if (o.biases != 0) {
    throw InvalidArgument("biases = " + std::to_string(o.biases) +
                          " is not available with --algo low-latency: allowed 0");
  }
  if (o.partial_dtype != DType::kBF16) {
    throw InvalidArgument(std::string("partial dtype ") + wire::word(o.partial_dtype) +
                          " is not available with --algo low-latency, which sends its node "
                          "sums in the tokens' type: allowed bf16");
  }
}

// The mask names nodes of this cluster, and the modes that can leave nodes out.
void check_active_nodes(const MoeOptions& o, int nodes) {
  if (o.active_nodes == 0) return;
  if (nodes > 64) {
    throw InvalidArgument(
        "active nodes: leaving nodes out needs a cluster of at most 64 nodes; "
        "this one has " +
        std::to_string(nodes));
  }
  if (nodes < 64 && o.active_nodes >> nodes != 0) {
    throw InvalidArgument("active nodes (mask " + std::to_string(o.active_nodes) +
                          ") names a node past the cluster's " + std::to_string(nodes));
  }
  if (o.active_nodes != every_node(nodes) && o.algo != MoeAlgo::kHier) {
    throw InvalidArgument(std::string("leaving nodes out is not available with --algo ") +
                          wire::word(o.algo) + ": allowed hier");
  }
}

}  // namespace

void validate(const MoeOptions& o, int nodes, int ranks_per_node) {
  const int n = nodes * ranks_per_node;
  check_range("tokens", o.tokens, 0, kMaxMoeTokens, "per PE");
  check_range("hidden", o.hidden, 8, kMaxMoeHidden);
  if (o.hidden % kMoeHiddenMultiple != 0) {
    throw InvalidArgument("hidden = " + std::to_string(o.hidden) + " must be a multiple of " +
                          std::to_string(kMoeHiddenMultiple) + " (rows of whole 16-byte blocks)");
  }
  check_range("experts", o.experts, n, kMaxMoeExperts, "at least one per PE");
  if (o.experts % n != 0) {
    throw InvalidArgument("experts = " + std::to_string(o.experts) +
                          " must spread evenly over the " + std::to_string(n) +
                          " PEs: a multiple of " + std::to_string(n));
  }
  check_range("topk", o.topk, 1, std::min(kMaxMoeTopk, o.experts), "distinct experts per token");
  check_range("biases", o.biases, 0, 2);
  if (o.partial_dtype != DType::kBF16 && o.partial_dtype != DType::kF32) {
    throw InvalidArgument(std::string("partial dtype ") + wire::word(o.partial_dtype) +
                          " is not allowed: bf16 or f32");
  }
  if (o.algo == MoeAlgo::kLowLatency) validate_low_latency(o);
  check_active_nodes(o, nodes);
  check_range("channels", o.channels, 1, 64);
  check_range("chunk_tokens", o.chunk_tokens, 1, 4096);
  // A forwarder waits while capacity - (tail - head) < chunk: a chunk above half a ring could
  // leave the receiver's lazily returned head and the forwarder's next chunk waiting on each
  // other.
  check_range("rdma_ring_tokens", o.rdma_ring_tokens, 2, 1 << 20);
  if (o.chunk_tokens * 2 > o.rdma_ring_tokens) {
    throw InvalidArgument(
        "chunk_tokens = " + std::to_string(o.chunk_tokens) +
        " is larger than half of rdma_ring_tokens = " + std::to_string(o.rdma_ring_tokens) +
        ": allowed up to " + std::to_string(o.rdma_ring_tokens / 2));
  }
}

}  // namespace symmesh
