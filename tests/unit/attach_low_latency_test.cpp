// The low-latency MoE calls an attached process makes (the decoding mode): what each PE
// receives per local expert, in which order; the combine's weighted sums; tensors on the heap
// used where they lie, and an output over its input refused; two micro-batches in flight and a
// third refused; a dropped handle freeing its half; a new shape making a new
// buffer; and the two modes' handles kept apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tests/support/attached_moe_routing.h"
#include "tests/support/attached_node.h"

namespace symmesh {
namespace {

using AttachedLowLatency = AttachedNode;

using namespace attached_moe;
constexpr int64_t kMaxTokens = 8;  // the buffer's tokens per PE

float weight_of(int k) {
  return 0.25f * float(k + 1);
}

struct Routed {
  std::vector<float> x, weights;
  std::vector<int64_t> idx;
};

Routed routed(int pe) {
  Routed r{std::vector<float>(kTokens * kHidden), std::vector<float>(kTokens * kTopk),
           std::vector<int64_t>(kTokens * kTopk)};
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t h = 0; h < kHidden; ++h) r.x[t * kHidden + h] = token_value(pe, t, h);
    for (int k = 0; k < kTopk; ++k) {
      r.idx[t * kTopk + k] = expert_of(pe, t, k);
      r.weights[t * kTopk + k] = weight_of(k);
    }
  }
  return r;
}

struct Received {
  std::vector<float> x;
  std::vector<int64_t> counts;
};

// The tokens are r.x, or `x` when given (the same routing).
std::shared_ptr<DispatchHandle> dispatch(Session& session, const Routed& r, Received& got,
                                         int64_t max_tokens = kMaxTokens,
                                         const float* x = nullptr) {
  return session.low_latency_dispatch(x ? x : r.x.data(), r.idx.data(), r.weights.data(), kTokens,
                                      kHidden, kTopk, kExperts, max_tokens, wire::DATA_TYPE_F32,
                                      [&](int64_t received) {
                                        got.x.resize(received * kHidden);
                                        got.counts.resize(kExperts / 2);
                                        return LowLatencyOutputs{got.x.data(), got.counts.data()};
                                      });
}

// "" when PE `pe` received, per local expert, every token that chose it, by source PE then
// token; else what differs.
std::string check_received(int pe, const Received& got) {
  int64_t row = 0;
  for (int local = 0; local < kExperts / 2; ++local) {
    const int64_t expert = pe * 2 + local;
    int64_t count = 0;
    for (int source = 0; source < 2; ++source) {
      for (int64_t t = 0; t < kTokens; ++t) {
        if (expert_of(source, t, 0) != expert && expert_of(source, t, 1) != expert) continue;
        if (row >= int64_t(got.x.size() / kHidden)) return "too few rows";
        if (got.x[row * kHidden + 3] != token_value(source, t, 3)) {
          return "row " + std::to_string(row) + " is not token " + std::to_string(source) + "/" +
                 std::to_string(t);
        }
        ++row;
        ++count;
      }
    }
    if (got.counts[local] != count) return "expert " + std::to_string(expert) + "'s count";
  }
  return row == int64_t(got.x.size() / kHidden) ? "" : "too many rows";
}

// The experts: local expert e scales its rows by (e + 1); the combine weighs them.
std::vector<float> run_experts(const Received& got) {
  std::vector<float> rows(got.x.size());
  int64_t row = 0;
  for (int local = 0; local < kExperts / 2; ++local) {
    for (int64_t i = 0; i < got.counts[local]; ++i, ++row) {
      for (int64_t h = 0; h < kHidden; ++h) {
        rows[row * kHidden + h] = float(local + 1) * got.x[row * kHidden + h];
      }
    }
  }
  return rows;
}

// "" when `out` holds, per token of PE `pe`, the sum over its experts of weight * scaled row.
std::string check_combined(int pe, const std::vector<float>& out) {
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t h = 0; h < kHidden; ++h) {
      float want = 0;
      for (int k = 0; k < kTopk; ++k) {
        const int64_t e = expert_of(pe, t, k);
        if (e >= 0) want += weight_of(k) * float(e % 2 + 1) * token_value(pe, t, h);
      }
      if (std::fabs(out[t * kHidden + h] - want) > 1e-5f * std::fabs(want)) {
        return "token " + std::to_string(t) + " element " + std::to_string(h);
      }
    }
  }
  return "";
}

TEST_F(AttachedLowLatency, EachExpertGetsItsTokensAndCombineWeighsAndSumsThemBack) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& s, int pe) -> std::string {
    const Routed r = routed(pe);
    for (int call = 0; call < 3; ++call) {  // both halves, then the first again
      Received got;
      auto handle = dispatch(s, r, got);
      if (std::string bad = check_received(pe, got); !bad.empty()) return "dispatch: " + bad;
      std::vector<float> out(kTokens * kHidden);
      s.low_latency_combine(*handle, run_experts(got).data(), out.data());
      if (std::string bad = check_combined(pe, out); !bad.empty()) return "combine: " + bad;
    }
    return "ok";
  });
  EXPECT_EQ(said, std::vector<std::string>(2, "ok"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

// Tokens and rows the process made on its heap are read there, not through the staging area:
// twice the tokens arrive as twice the rows, and twice the rows give exactly twice the result
// (a read of the staging area, which still holds the call before's, would give the same again).
// Received tokens and the combined ones go onto the heap when the process offers it. Then the
// staging path once more.
TEST_F(AttachedLowLatency, TensorsOnTheHeapAreReadAndWrittenWhereTheyLie) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& s, int pe) -> std::string {
    const Routed r = routed(pe);
    // The most rows a PE can receive: every token of both PEs, once per local expert.
    const size_t most = 2 * kTokens * 2 * kHidden;
    auto* heap = static_cast<float*>(s.malloc(most * sizeof(float)));
    std::vector<float> once(kTokens * kHidden), twice(kTokens * kHidden);
    for (int call = 0; call < 3; ++call) {
      Received got;
      auto handle = dispatch(s, r, got);
      std::vector<float> rows = run_experts(got);
      std::vector<float> out(kTokens * kHidden);
      if (call == 1) {
        // Twice the tokens from the heap arrive as twice the rows.
        Received twice_got;
        auto* heap_x = static_cast<float*>(s.malloc(r.x.size() * sizeof(float)));
        for (size_t i = 0; i < r.x.size(); ++i) heap_x[i] = 2 * r.x[i];
        auto twice_handle = dispatch(s, r, twice_got, kMaxTokens, heap_x);
        s.free(heap_x);
        if (twice_got.x.size() != got.x.size()) return "the tokens on the heap arrived otherwise";
        for (size_t i = 0; i < got.x.size(); ++i) {
          if (twice_got.x[i] != 2 * got.x[i]) return "received element " + std::to_string(i);
        }
        twice_handle.reset();  // dropped: its half is free again
        for (size_t i = 0; i < rows.size(); ++i) heap[i] = 2 * rows[i];
        auto* heap_out = static_cast<float*>(s.malloc(out.size() * sizeof(float)));
        std::fill(heap_out, heap_out + out.size(), -7.0f);  // no combine gives it
        s.low_latency_combine(*handle, heap, heap_out);
        twice.assign(heap_out, heap_out + out.size());
        s.free(heap_out);
        // Received tokens written into a room on the heap (over a fill no token has), taken
        // where they lie (this dispatch takes the half of the one just combined).
        auto* room = static_cast<float*>(s.malloc(most * sizeof(float)));
        std::fill(room, room + most, -7.0f);
        std::vector<int64_t> counts(kExperts / 2);
        int64_t arrived = 0;
        auto room_handle = s.low_latency_dispatch(
            r.x.data(), r.idx.data(), r.weights.data(), kTokens, kHidden, kTopk, kExperts,
            kMaxTokens, wire::DATA_TYPE_F32,
            [&](int64_t received) {
              arrived = received;
              return LowLatencyOutputs{room, counts.data()};
            },
            RecvRoom{room, int64_t(most / kHidden)});
        room_handle.reset();
        const bool same = size_t(arrived * kHidden) == got.x.size() &&
                          std::equal(got.x.begin(), got.x.end(), room);
        s.free(room);
        if (!same) return "the tokens received into a room on the heap differ";
      } else {
        s.low_latency_combine(*handle, rows.data(), out.data());
        if (std::string bad = check_combined(pe, out); !bad.empty()) return "combine: " + bad;
        once = out;
      }
    }
    s.free(heap);
    for (size_t i = 0; i < once.size(); ++i) {
      if (twice[i] != 2 * once[i]) {
        return "element " + std::to_string(i) + ": " + std::to_string(twice[i]) +
               " from the heap's rows, not twice " + std::to_string(once[i]);
      }
    }
    return "ok";
  });
  EXPECT_EQ(said, std::vector<std::string>(2, "ok"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

// An output over its own input on the heap (node peers read the input while the output is
// written) is refused by the library, naming both, before anything is sent: the session goes
// on. A room a row short of what arrives is left alone, the rows taken from the staging area.
TEST_F(AttachedLowLatency, AnOutputOverItsInputIsRefusedBeforeAnythingIsSent) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& s, int pe) -> std::string {
    const Routed r = routed(pe);
    const size_t most = 2 * kTokens * 2 * kHidden;  // every token of both PEs, twice
    auto* heap = static_cast<float*>(s.malloc((r.x.size() + most) * sizeof(float)));
    std::copy(r.x.begin(), r.x.end(), heap);
    Received got;
    std::vector<int64_t> counts(kExperts / 2);
    const auto into_room = [&](const float* x, RecvRoom room) {
      return s.low_latency_dispatch(
          x, r.idx.data(), r.weights.data(), kTokens, kHidden, kTopk, kExperts, kMaxTokens,
          wire::DATA_TYPE_F32,
          [&](int64_t received) {
            got.x.resize(received * kHidden);
            return LowLatencyOutputs{got.x.data(), counts.data()};
          },
          room);
    };
    // x at the heap's start, the room from its last row on.
    const RecvRoom over_x{heap + r.x.size() - kHidden, int64_t(most / kHidden)};
    std::string bad = refusal_missing([&] { into_room(heap, over_x); },
                                      "low_latency_dispatch's out at heap offset",
                                      "overlaps low_latency_dispatch's x");
    if (!bad.empty()) return "dispatch: " + bad;
    // A room a row short: the rows come through the staging area, the room keeps its fill.
    Received want;
    auto handle = dispatch(s, r, want);
    const int64_t arrived = int64_t(want.x.size()) / kHidden;
    float* room = heap + r.x.size();
    std::fill(room, room + most, -7.0f);
    handle.reset();
    handle = into_room(r.x.data(), RecvRoom{room, arrived - 1});
    if (got.x != want.x || arrived == 0 || room[0] != -7.0f) return "a room a row short";
    // The combine's out over its rows on the heap.
    const std::vector<float> rows = run_experts(want);
    std::copy(rows.begin(), rows.end(), room);
    bad = refusal_missing(
        [&] { s.low_latency_combine(*handle, room, room + rows.size() - kHidden); },
        "low_latency_combine's out at heap offset", "overlaps low_latency_combine's expert rows");
    if (!bad.empty()) return "combine: " + bad;
    std::vector<float> out(kTokens * kHidden);
    s.low_latency_combine(*handle, room, out.data());
    s.free(heap);
    if (std::string wrong = check_combined(pe, out); !wrong.empty()) return "then: " + wrong;
    return "ok";
  });
  EXPECT_EQ(said, std::vector<std::string>(2, "ok"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

TEST_F(AttachedLowLatency, TwoMicroBatchesFlyAHalfStillHeldIsRefusedAndADroppedHandleFreesIt) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& s, int pe) -> std::string {
    const Routed r = routed(pe);
    Received a, b, c;
    auto first = dispatch(s, r, a);  // dispatch 1, the first half
    auto second = dispatch(s, r, b);
    std::vector<std::string> refused;
    auto refuse = [&](auto call) {
      try {
        call();
        refused.push_back("accepted");
      } catch (const InvalidArgument& e) {
        refused.push_back(e.what());
      }
    };
    refuse([&] { dispatch(s, r, c); });  // both halves held
    std::vector<float> out(kTokens * kHidden);
    s.low_latency_combine(*second, run_experts(b).data(), out.data());  // out of order
    if (std::string bad = check_combined(pe, out); !bad.empty()) return "second: " + bad;
    refuse([&] { dispatch(s, r, c); });  // the next dispatch takes the first's half again
    refuse([&] { s.low_latency_combine(*second, run_experts(b).data(), out.data()); });
    first.reset();  // never combined: its half is free for the next dispatch
    auto third = dispatch(s, r, c);
    if (std::string bad = check_received(pe, c); !bad.empty()) return "third: " + bad;
    s.low_latency_combine(*third, run_experts(c).data(), out.data());
    if (std::string bad = check_combined(pe, out); !bad.empty()) return "third: " + bad;
    std::string all;
    for (const std::string& why : refused) all += why + "\n";
    return all;
  });
  const std::string held =
      "low_latency_dispatch: dispatch 1, two dispatches back, is not yet combined: combine it, "
      "or drop its handle, first (two micro-batches may be in flight, each buffer half taken "
      "again two dispatches later)\n";
  const std::string want = held + held +
                           "low_latency_combine: this dispatch was combined already: dispatch "
                           "again (a low-latency dispatch is combined once)\n";
  EXPECT_EQ(said, std::vector<std::string>(2, want));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

TEST_F(AttachedLowLatency, ANewShapeMakesANewBufferAndTheModesKeepTheirHandlesApart) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& s, int pe) -> std::string {
    const Routed r = routed(pe);
    std::vector<float> out(kTokens * kHidden);
    std::shared_ptr<DispatchHandle> kept;  // held across the new buffer, dropped after it
    for (const int64_t max_tokens : {kMaxTokens, kTokens}) {  // the second call: a new buffer
      Received got;
      auto handle = dispatch(s, r, got, max_tokens);
      s.low_latency_combine(*handle, run_experts(got).data(), out.data());
      if (std::string bad = check_combined(pe, out); !bad.empty()) return "combine: " + bad;
      if (!kept) kept = handle;
    }
    kept.reset();  // its release, sent with the next call, names a handle of the old buffer
    std::string refused;
    try {
      Received got;
      dispatch(s, r, got, kTokens - 1);  // fewer than this PE's tokens
    } catch (const InvalidArgument& e) {
      refused = e.what();
    }
    Received got;
    auto low_latency = dispatch(s, r, got);
    try {
      s.combine(*low_latency, got.x.data(), kHidden, wire::DATA_TYPE_F32, nullptr, out.data());
    } catch (const InvalidArgument& e) {
      refused += std::string("; ") + e.what();
    }
    s.low_latency_combine(*low_latency, run_experts(got).data(), out.data());
    return refused;
  });
  for (const std::string& s : said) {
    EXPECT_EQ(s,
              "low_latency_dispatch: 6 tokens, topk 2, 4 experts; allowed tokens 0 to 5 per PE, "
              "topk 1 to 32 and at most the experts, experts a multiple of the 2 PEs up to 65536; "
              "combine: the handle is a low-latency dispatch's: use low_latency_combine");
  }
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

}  // namespace
}  // namespace symmesh
