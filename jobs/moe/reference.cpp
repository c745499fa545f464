#include "jobs/moe/reference.h"

#include <algorithm>
#include <cstring>

#include "ops/seeded.h"

namespace symmesh {
namespace {

std::vector<uint16_t> uniform_bf16(size_t count, uint64_t stream, float scale) {
  std::vector<uint16_t> out(count);
  const uint64_t base = splitmix64(stream);
  for (size_t i = 0; i < count; ++i) {
    const float value = plus_minus_one(splitmix64(base + i));
    out[i] = f32_to_bf16(value * scale);
  }
  return out;
}

std::vector<uint16_t> load_bf16(const std::string& path, const MoeOptions& o) {
  const std::vector<std::byte> bytes = load_matrix(path, o.tokens, o.hidden, DType::kBF16);
  std::vector<uint16_t> out(bytes.size() / 2);
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

}  // namespace

std::vector<uint16_t> moe_tokens(const MoeOptions& o, int pe, const InputSpec& spec) {
  if (!spec.dir.empty()) return load_bf16(spec.dir + "/x_" + std::to_string(pe) + ".npy", o);
  return uniform_bf16(size_t(o.tokens) * o.hidden, spec.seed * 1000003 + uint64_t(pe) * 7 + 1,
                      1.0f);
}

std::vector<uint16_t> moe_bias(const MoeOptions& o, int pe, int index, const InputSpec& spec) {
  if (!spec.dir.empty()) {
    return load_bf16(
        spec.dir + "/bias_" + std::to_string(index) + "_" + std::to_string(pe) + ".npy", o);
  }
  return uniform_bf16(size_t(o.tokens) * o.hidden,
                      spec.seed * 1000003 + uint64_t(pe) * 7 + 2 + uint64_t(index), 0.125f);
}

void expert_partial(const MoeOptions& o, const Routing& routing, int64_t token, int pe, int n_pes,
                    const uint16_t* x, float* out) {
  std::fill(out, out + o.hidden, 0.0f);
  for (int k = 0; k < routing.topk; ++k) {
    const int32_t expert = routing.expert(token, k);
    if (expert < 0 || expert_pe(o, n_pes, expert) != pe) continue;
    const float factor = expert_scale(expert) *
                         (o.weighting == MoeWeighting::kTopk ? routing.weight(token, k) : 1.0f);
    for (int64_t h = 0; h < o.hidden; ++h) out[h] += factor * bf16_to_f32(x[h]);
  }
}

std::vector<ReceivedToken> reference_dispatch(const MoeOptions& o,
                                              const std::vector<Routing>& routings,
                                              const ClusterShape& shape, int pe) {
  std::vector<ReceivedToken> received;
  for (int source = 0; source < shape.n_pes(); ++source) {
    const DispatchLayout layout = dispatch_layout(routings[source], o, shape);
    for (int64_t t = 0; t < layout.tokens; ++t) {
      if (layout.goes_to_pe(t, pe)) received.push_back({source, t});
    }
  }
  return received;
}

std::vector<std::vector<ReceivedToken>> reference_low_latency_dispatch(
    const MoeOptions& o, const std::vector<Routing>& routings, int pe) {
  const int n = int(routings.size()), per_pe = experts_per_pe(o, n);
  std::vector<std::vector<ReceivedToken>> received(per_pe);
  for (int local = 0; local < per_pe; ++local) {
    for (int source = 0; source < n; ++source) {
      const Routing& routing = routings[source];
      for (int64_t t = 0; t < routing.tokens; ++t) {
        for (int k = 0; k < routing.topk; ++k) {
          if (routing.expert(t, k) == pe * per_pe + local) received[local].push_back({source, t});
        }
      }
    }
  }
  return received;
}

std::vector<uint16_t> reference_combine(const MoeOptions& o, const Routing& routing,
                                        const std::vector<uint16_t>& x,
                                        const std::vector<std::vector<uint16_t>>& biases) {
  std::vector<uint16_t> out(size_t(o.tokens) * o.hidden);
  std::vector<float> sum(o.hidden);
  for (int64_t t = 0; t < o.tokens; ++t) {
    std::fill(sum.begin(), sum.end(), 0.0f);
    for (int k = 0; k < routing.topk; ++k) {
      const int32_t expert = routing.expert(t, k);
      if (expert < 0) continue;
      const float factor =
          expert_scale(expert) * (o.weighting == MoeWeighting::kTopk ? routing.weight(t, k) : 1.0f);
      for (int64_t h = 0; h < o.hidden; ++h) sum[h] += factor * bf16_to_f32(x[t * o.hidden + h]);
    }
    for (const auto& bias : biases) {
      for (int64_t h = 0; h < o.hidden; ++h) sum[h] += bf16_to_f32(bias[t * o.hidden + h]);
    }
    for (int64_t h = 0; h < o.hidden; ++h) out[t * o.hidden + h] = f32_to_bf16(sum[h]);
  }
  return out;
}

}  // namespace symmesh
