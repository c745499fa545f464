#include "ops/moe/routing.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "api/topk_check.h"
#include "common/errors.h"
#include "ops/moe/active_nodes.h"
#include "ops/npy.h"
#include "ops/seeded.h"

namespace symmesh {
namespace {

// Skewed: expert i (in a seeded order) drawn with probability proportional to 1 / (i + 1)^1.5,
// so a handful of experts take most tokens.
std::vector<double> skewed_cdf(int experts) {
  std::vector<double> cdf(experts);
  double total = 0;
  for (int i = 0; i < experts; ++i) cdf[i] = total += 1.0 / std::pow(i + 1.0, 1.5);
  for (double& c : cdf) c /= total;
  return cdf;
}

Routing generate(const MoeOptions& o, int pe, const RoutingSpec& spec) {
  Routing r{o.tokens, o.topk, std::vector<int32_t>(size_t(o.tokens) * o.topk),
            std::vector<float>(size_t(o.tokens) * o.topk)};
  std::vector<int32_t> order(o.experts);
  std::iota(order.begin(), order.end(), 0);
  for (int i = o.experts - 1; i > 0; --i) {  // the skew's favourite experts, the same on every PE
    std::swap(order[i], order[splitmix64(spec.seed * 31 + i) % (i + 1)]);
  }
  const std::vector<double> cdf = skewed_cdf(o.experts);
  uint64_t state = splitmix64(spec.seed * 1000003 + uint64_t(pe) + 1);
  for (int64_t t = 0; t < o.tokens; ++t) {
    int32_t* ids = &r.experts[t * o.topk];
    float* weights = &r.weights[t * o.topk];
    float sum = 0;
    for (int k = 0; k < o.topk; ++k) {
      int32_t id;
      do {  // distinct experts per token; topk <= experts, so this ends
        const uint64_t draw = splitmix64(state++);
        id =
            spec.kind == RoutingKind::kSkewed
                ? order[std::lower_bound(cdf.begin(), cdf.end(), unit_interval(draw)) - cdf.begin()]
                : int32_t(draw % uint64_t(o.experts));
      } while (std::find(ids, ids + k, id) != ids + k);
      ids[k] = id;
      weights[k] = float(0.05 + unit_interval(splitmix64(state++)));
      sum += weights[k];
    }
    for (int k = 0; k < o.topk; ++k) weights[k] /= sum;  // a gate's softmax-like weights
  }
  return r;
}

Routing load(const MoeOptions& o, int pe, const RoutingSpec& spec) {
  const std::string ids_path = spec.dir + "/topk_idx_" + std::to_string(pe) + ".npy";
  const std::string weights_path = spec.dir + "/topk_weights_" + std::to_string(pe) + ".npy";
  const NpyArray ids = read_npy(ids_path);
  const NpyArray weights = read_npy(weights_path);
  auto check_shape = [&](const NpyArray& a, const std::string& path) {
    if (a.rows != o.tokens || a.cols != o.topk) {
      throw InvalidArgument(path + ": shape (" + std::to_string(a.rows) + ", " +
                            std::to_string(a.cols) + ") but the job has (tokens, topk) = (" +
                            std::to_string(o.tokens) + ", " + std::to_string(o.topk) + ")");
    }
  };
  check_shape(ids, ids_path);
  check_shape(weights, weights_path);
  if (ids.descr != "<i8" && ids.descr != "<i4") {
    throw InvalidArgument(ids_path + ": dtype '" + ids.descr + "': allowed '<i8' or '<i4'");
  }
  if (weights.descr != "<f4") {
    throw InvalidArgument(weights_path + ": dtype '" + weights.descr + "': allowed '<f4'");
  }
  Routing r{o.tokens, o.topk, std::vector<int32_t>(size_t(o.tokens) * o.topk),
            std::vector<float>(size_t(o.tokens) * o.topk)};
  std::memcpy(r.weights.data(), weights.data.data(), r.weights.size() * sizeof(float));
  std::vector<int64_t> wide(r.experts.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    if (ids.descr == "<i8") {
      std::memcpy(&wide[i], ids.data.data() + i * 8, 8);
    } else {
      int32_t narrow;
      std::memcpy(&narrow, ids.data.data() + i * 4, 4);
      wide[i] = narrow;
    }
  }
  check_topk_ids(wide.data(), o.tokens, o.topk, o.experts, ids_path);
  std::copy(wide.begin(), wide.end(), r.experts.begin());
  return r;
}

}  // namespace

void check_routing(const Routing& r, int experts, const std::string& what) {
  check_topk_ids(r.experts.data(), r.tokens, r.topk, experts, what);
}

RoutingSpec parse_routing(const std::string& text, uint64_t seed) {
  RoutingSpec spec;
  spec.seed = seed;
  if (text == "uniform") return spec;
  if (text == "skewed") {
    spec.kind = RoutingKind::kSkewed;
    return spec;
  }
  spec.kind = RoutingKind::kFile;
  spec.dir = text;
  return spec;
}

Routing make_routing(const MoeOptions& o, int pe, const RoutingSpec& spec) {
  return spec.kind == RoutingKind::kFile ? load(o, pe, spec) : generate(o, pe, spec);
}

void leave_out_nodes(Routing& routing, const MoeOptions& options, const ClusterShape& shape) {
  if (options.active_nodes == 0) return;
  for (int32_t& expert : routing.experts) {
    if (expert < 0 || expert >= options.experts) continue;  // check_routing names these
    const int node = expert_pe(options, shape.n_pes(), expert) / shape.ranks_per_node;
    if (!ActiveNodes::takes_part(options.active_nodes, node)) expert = -1;
  }
}

}  // namespace symmesh
