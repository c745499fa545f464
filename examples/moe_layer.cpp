// The C++ twin of examples/moe_layer.py: an MoE layer (a linear gate, softmax top-k routing,
// E SwiGLU experts, weights from a seed) split over the world by expert parallelism with
// libsymmesh's dispatch and combine, trained for a few SGD steps, each step's output, token
// gradients and expert gradients checked against the same layer computed in this process on
// every PE's tokens. The router is held fixed (its weights are constants to the backward
// pass), which keeps the hand-written backward short; the Python example trains it too.
//
// Run on every node: symmesh launch -- symmesh_example_moe_layer [steps]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "api/session.h"

namespace {

constexpr int kTokens = 16, kHidden = 16, kFfn = 24, kTopk = 2, kExpertsPerPe = 2;
constexpr float kLearningRate = 0.5f;

using Vec = std::vector<float>;

Vec seeded(size_t count, uint32_t seed, float scale) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  Vec out(count);
  for (float& v : out) v = normal(generator);
  return out;
}

float silu(float a) {
  return a / (1.0f + std::exp(-a));
}
float silu_grad(float a) {
  const float s = 1.0f / (1.0f + std::exp(-a));
  return s * (1.0f + a * (1.0f - s));
}

// y = (silu(x W1) * (x W3)) W2, and its backward.
struct Expert {
  Vec w1, w3, w2, g1, g3, g2;  // [H][F], [H][F], [F][H] and their gradients
  explicit Expert(uint32_t seed)
      : w1(seeded(kHidden * kFfn, seed, 0.25f)),
        w3(seeded(kHidden * kFfn, seed + 1, 0.25f)),
        w2(seeded(kFfn * kHidden, seed + 2, 0.2f)),
        g1(w1.size()),
        g3(w3.size()),
        g2(w2.size()) {}

  // out += scale * expert(x); with `grad_out` (dL/d(expert(x)) * scale), also accumulates the
  // parameters' gradients and adds dL/dx to grad_x.
  void run(const float* x, float scale, float* out, const float* grad_out, float* grad_x) {
    float a[kFfn], b[kFfn], h[kFfn];
    for (int f = 0; f < kFfn; ++f) {
      a[f] = b[f] = 0;
      for (int i = 0; i < kHidden; ++i) {
        a[f] += x[i] * w1[i * kFfn + f];
        b[f] += x[i] * w3[i * kFfn + f];
      }
      h[f] = silu(a[f]) * b[f];
    }
    if (out) {
      for (int o = 0; o < kHidden; ++o) {
        float y = 0;
        for (int f = 0; f < kFfn; ++f) y += h[f] * w2[f * kHidden + o];
        out[o] += scale * y;
      }
    }
    if (!grad_out) return;
    for (int f = 0; f < kFfn; ++f) {
      float gh = 0;
      for (int o = 0; o < kHidden; ++o) {
        gh += w2[f * kHidden + o] * grad_out[o];
        g2[f * kHidden + o] += h[f] * grad_out[o];
      }
      const float ga = gh * b[f] * silu_grad(a[f]), gb = gh * silu(a[f]);
      for (int i = 0; i < kHidden; ++i) {
        grad_x[i] += w1[i * kFfn + f] * ga + w3[i * kFfn + f] * gb;
        g1[i * kFfn + f] += x[i] * ga;
        g3[i * kFfn + f] += x[i] * gb;
      }
    }
  }
  void step() {
    for (auto [w, g] : {std::pair{&w1, &g1}, std::pair{&w3, &g3}, std::pair{&w2, &g2}}) {
      for (size_t i = 0; i < w->size(); ++i) (*w)[i] -= kLearningRate * (*g)[i];
      std::fill(g->begin(), g->end(), 0.0f);
    }
  }
};

// Softmax over the gate's scores, the top k renormalized: ids [tokens][k], weights.
void route(const Vec& x, const Vec& gate, int experts, std::vector<int64_t>& ids, Vec& weights) {
  for (int t = 0; t < kTokens; ++t) {
    Vec p(experts);
    for (int e = 0; e < experts; ++e) {
      for (int i = 0; i < kHidden; ++i) p[e] += x[t * kHidden + i] * gate[i * experts + e];
    }
    const float top = *std::max_element(p.begin(), p.end());
    for (float& v : p) v = std::exp(v - top);
    std::vector<int> order(experts);
    for (int e = 0; e < experts; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int l, int r) { return p[l] > p[r]; });
    float sum = 0;
    for (int k = 0; k < kTopk; ++k) sum += p[order[k]];
    for (int k = 0; k < kTopk; ++k) {
      ids[t * kTopk + k] = order[k];
      weights[t * kTopk + k] = p[order[k]] / sum;
    }
  }
}

float relative_error(const Vec& got, const Vec& want) {
  float diff = 0, top = 1e-30f;
  for (size_t i = 0; i < got.size(); ++i) {
    diff = std::max(diff, std::fabs(got[i] - want[i]));
    top = std::max(top, std::fabs(want[i]));
  }
  return diff / top;
}

int run(int steps) {
  auto session = symmesh::Session::attach_from_environment();
  const int rank = session->place().rank, world = session->place().world_size;
  const int experts = kExpertsPerPe * world;
  const Vec gate = seeded(size_t(kHidden) * experts, 7, 0.3f);
  std::vector<Expert> mine, reference;
  for (int e = 0; e < experts; ++e) {
    mine.emplace_back(100 + 3 * e);
    reference.emplace_back(100 + 3 * e);
  }
  float worst = 0;
  for (int step = 0; step < steps; ++step) {
    // Every PE's tokens, routing and targets (seeded: each PE can make all of them).
    std::vector<Vec> x(world), target(world), weights(world, Vec(kTokens * kTopk));
    std::vector<std::vector<int64_t>> ids(world, std::vector<int64_t>(kTokens * kTopk));
    for (int p = 0; p < world; ++p) {
      x[p] = seeded(kTokens * kHidden, 1000 * step + p, 1.0f);
      target[p] = seeded(kTokens * kHidden, 1000 * step + p + 500, 1.0f);
      route(x[p], gate, experts, ids[p], weights[p]);
    }
    const float scale = 2.0f / float(kTokens * world * kHidden);  // d(mean square)/dy
    // symmesh: dispatch, this PE's experts, combine; then the backward the same way back.
    Vec recv_x, recv_w;
    std::vector<int64_t> recv_idx;
    auto handle = session->dispatch(
        x[rank].data(), ids[rank].data(), weights[rank].data(), kTokens, kHidden, kTopk, experts,
        symmesh::wire::DATA_TYPE_F32, [&](int64_t received) {
          recv_x.resize(received * kHidden);
          recv_idx.resize(received * kTopk);
          recv_w.resize(received * kTopk);
          return symmesh::DispatchOutputs{recv_x.data(), recv_idx.data(), recv_w.data()};
        });
    const int64_t received = handle->received;
    Vec rows(received * kHidden, 0.0f), y(kTokens * kHidden);
    auto each_local = [&](auto&& call) {
      for (int64_t i = 0; i < received; ++i) {
        for (int k = 0; k < kTopk; ++k) {
          const int64_t local = recv_idx[i * kTopk + k];
          if (local >= 0) call(i, mine[rank * kExpertsPerPe + local], recv_w[i * kTopk + k]);
        }
      }
    };
    each_local([&](int64_t i, Expert& e, float w) {
      e.run(&recv_x[i * kHidden], w, &rows[i * kHidden], nullptr, nullptr);
    });
    session->combine(*handle, rows.data(), kHidden, symmesh::wire::DATA_TYPE_F32, nullptr,
                     y.data());
    Vec grad_y(kTokens * kHidden), grad_rows(received * kHidden), grad_recv(received * kHidden);
    for (size_t i = 0; i < grad_y.size(); ++i) grad_y[i] = scale * (y[i] - target[rank][i]);
    // Combine's backward: each token's gradient to every PE that received it.
    Vec unused_w;
    std::vector<int64_t> unused_idx;
    session->dispatch(
        grad_y.data(), ids[rank].data(), weights[rank].data(), kTokens, kHidden, kTopk, experts,
        symmesh::wire::DATA_TYPE_F32, [&](int64_t count) {
          unused_idx.resize(count * kTopk);
          unused_w.resize(count * kTopk);
          return symmesh::DispatchOutputs{grad_rows.data(), unused_idx.data(), unused_w.data()};
        });
    each_local([&](int64_t i, Expert& e, float w) {
      Vec g(kHidden);
      for (int o = 0; o < kHidden; ++o) g[o] = w * grad_rows[i * kHidden + o];
      e.run(&recv_x[i * kHidden], 0, nullptr, g.data(), &grad_recv[i * kHidden]);
    });
    Vec grad_x(kTokens * kHidden);  // dispatch's backward: the rows' gradients summed home
    session->combine(*handle, grad_recv.data(), kHidden, symmesh::wire::DATA_TYPE_F32, nullptr,
                     grad_x.data());

    // The reference: the whole layer here, on every PE's tokens.
    Vec ref_y, ref_grad_x;
    for (int p = 0; p < world; ++p) {
      Vec py(kTokens * kHidden, 0.0f), pg(kTokens * kHidden, 0.0f);
      for (int t = 0; t < kTokens; ++t) {
        for (int k = 0; k < kTopk; ++k) {
          reference[ids[p][t * kTopk + k]].run(&x[p][t * kHidden], weights[p][t * kTopk + k],
                                               &py[t * kHidden], nullptr, nullptr);
        }
      }
      for (int t = 0; t < kTokens; ++t) {
        Vec g(kHidden);
        for (int k = 0; k < kTopk; ++k) {
          const float w = weights[p][t * kTopk + k];
          for (int o = 0; o < kHidden; ++o) {
            g[o] = w * scale * (py[t * kHidden + o] - target[p][t * kHidden + o]);
          }
          reference[ids[p][t * kTopk + k]].run(&x[p][t * kHidden], 0, nullptr, g.data(),
                                               &pg[t * kHidden]);
        }
      }
      if (p == rank) ref_y = py, ref_grad_x = pg;
    }
    float error = std::max(relative_error(y, ref_y), relative_error(grad_x, ref_grad_x));
    for (int e = rank * kExpertsPerPe; e < (rank + 1) * kExpertsPerPe; ++e) {
      error = std::max({error, relative_error(mine[e].g1, reference[e].g1),
                        relative_error(mine[e].g3, reference[e].g3),
                        relative_error(mine[e].g2, reference[e].g2)});
    }
    worst = std::max(worst, error);
    std::printf("moe_layer (C++): rank %d step %d: max relative error %.2e\n", rank, step, error);
    if (!(error <= 1e-5f)) {
      std::fprintf(stderr, "moe_layer (C++): rank %d: off by %.2e relative, over 1e-5\n", rank,
                   error);
      return 1;
    }
    for (auto& e : mine) e.step();
    for (auto& e : reference) e.step();
  }
  session->barrier();
  std::printf(
      "moe_layer (C++): rank %d of %d: %d steps forward and backward match the single-process "
      "layer, max relative error %.2e: ok\n",
      rank, world, steps, worst);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc > 1 ? std::stoi(argv[1]) : 3);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe_layer (C++): %s\n", e.what());
    return 1;
  }
}
