// MoE low-latency dispatch and combine: what each local expert receives (bits, order, sources)
// against the routings of every PE, the combine's weighted sums bitwise against an f32
// reference in the combine's order (per PE in topk order, per node in local-rank order rounded
// once, then in node order), a PE with fewer tokens than the buffer takes, two micro-batches in
// flight, and the calls refused (node peers combining different dispatches among them).
#include "ops/moe/low_latency.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include "common/streaming_copy.h"

#include "jobs/moe/reference.h"
#include "runtime/barrier.h"
#include "tests/support/local_cluster.h"
#include "tests/support/moe_shape.h"

namespace symmesh {
namespace {

constexpr int64_t kHidden = 16;
constexpr int kTopk = 3;
constexpr int kExperts = 12;
constexpr int64_t kMaxTokens = 9;

LocalClusterOptions cluster_options(int nodes, int ranks) {
  return op_test_options(nodes, ranks, 16 << 20);
}

LowLatencyShape buffer_shape() {
  return {.max_tokens = kMaxTokens, .hidden = kHidden, .topk = kTopk, .experts = kExperts};
}

// One micro-batch of one PE: its tokens (bf16) and routing; PE 1 has fewer tokens.
struct Batch {
  Routing routing;
  std::vector<uint16_t> x;
};

Batch make_batch(int pe, uint64_t seed) {
  const MoeOptions o = moe_shape(pe == 1 ? kMaxTokens - 4 : kMaxTokens, kHidden, kTopk, kExperts);
  return {make_routing(o, pe, parse_routing("uniform", seed)),
          moe_tokens(o, pe, InputSpec{seed, ""})};
}

float bf16_value(uint16_t bits) {
  float f = 0;
  load_f32(&f, &bits, 1, DType::kBF16);
  return f;
}

uint16_t bf16_bits(float f) {
  uint16_t bits = 0;
  store_from_f32(&bits, &f, 1, DType::kBF16);
  return bits;
}

// The stand-in expert of global expert e on one element, as the experts below compute it.
uint16_t expert_output(uint16_t x, int expert) {
  return bf16_bits(bf16_value(x) * expert_scale(expert));
}

// Every received token's row, scaled by its expert.
std::vector<uint16_t> run_experts(const LowLatencyDispatch& d, int first_expert) {
  std::vector<uint16_t> out(d.x.size() / 2);
  const auto* x = reinterpret_cast<const uint16_t*>(d.x.data());
  for (int le = 0; le + 1 < int(d.offset.size()); ++le) {
    for (int64_t r = d.offset[le]; r < d.offset[le + 1]; ++r) {
      for (int64_t h = 0; h < kHidden; ++h) {
        out[r * kHidden + h] = expert_output(x[r * kHidden + h], first_expert + le);
      }
    }
  }
  return out;
}

struct Outcome {
  LowLatencyDispatch dispatched;
  std::vector<std::byte> x;  // the dispatch's, kept: combine hands the handle's back
  std::vector<std::byte> combined;
};

// Combines `o`'s dispatch with the expert rows `rows`, keeping what the dispatch delivered.
void combine(LowLatencyBuffer& buffer, Outcome& o, const void* rows, int64_t tokens) {
  o.x = o.dispatched.x;
  o.combined.resize(size_t(tokens) * kHidden * 2);
  buffer.combine(o.dispatched, rows, o.combined.data());
}

// `value` added to a sum that starts at its first term.
void add(float& sum, bool& any, float value) {
  sum = any ? sum + value : value;
  any = true;
}

// What PE `pe` combines for element h of token t: per PE holding some of its experts the
// weighted rows in topk order (a sum that starts at its first term), added per node in local-rank
// order and rounded, then per node.
uint16_t combined_element(const Batch& mine, int64_t t, int64_t h, int ranks, int n) {
  const int per_pe = kExperts / n;
  float total = 0;
  bool any_node = false;
  for (int node = 0; node < n / ranks; ++node) {
    float node_sum = 0;
    bool any = false;
    for (int p = node * ranks; p < (node + 1) * ranks; ++p) {
      float partial = 0;
      bool held = false;
      for (int k = 0; k < kTopk; ++k) {
        const int expert = mine.routing.expert(t, k);
        if (expert < 0 || expert / per_pe != p) continue;
        add(partial, held,
            mine.routing.weight(t, k) * bf16_value(expert_output(mine.x[t * kHidden + h], expert)));
      }
      if (held) add(node_sum, any, partial);
    }
    if (any) add(total, any_node, bf16_value(bf16_bits(node_sum)));
  }
  return bf16_bits(total);
}

// Checks PE `pe`'s dispatch against every PE's batch and its combine against the reference.
void expect_outcome(const std::vector<Batch>& batches, int ranks, int pe, const Outcome& got,
                    const std::string& what) {
  const int n = int(batches.size());
  const int per_pe = kExperts / n;
  const LowLatencyDispatch& d = got.dispatched;
  ASSERT_EQ(int(d.offset.size()), per_pe + 1) << what;
  ASSERT_EQ(got.x.size(), size_t(d.received()) * kHidden * 2) << what;
  const auto* x = reinterpret_cast<const uint16_t*>(got.x.data());
  for (int le = 0; le < per_pe; ++le) {
    const int expert = pe * per_pe + le;
    int64_t row = 0;
    for (int source = 0; source < n; ++source) {
      const Batch& b = batches[source];
      for (int64_t t = 0; t < b.routing.tokens; ++t) {
        bool routed = false;
        for (int k = 0; k < kTopk; ++k) routed = routed || b.routing.expert(t, k) == expert;
        if (!routed) continue;
        ASSERT_LT(row, d.count(le)) << what << " PE " << pe << " expert " << expert;
        const int64_t slot = d.offset[le] + row;
        EXPECT_EQ(d.source_pe[slot], source) << what;
        EXPECT_EQ(d.source_token[slot], t) << what;
        EXPECT_EQ(0, std::memcmp(x + slot * kHidden, b.x.data() + t * kHidden, kHidden * 2))
            << what << " PE " << pe << " expert " << expert << " token " << source << "/" << t;
        ++row;
      }
    }
    EXPECT_EQ(row, d.count(le)) << what << " PE " << pe << " expert " << expert;
  }
  const Batch& mine = batches[pe];
  ASSERT_EQ(got.combined.size(), size_t(mine.routing.tokens) * kHidden * 2) << what;
  const auto* combined = reinterpret_cast<const uint16_t*>(got.combined.data());
  for (int64_t t = 0; t < mine.routing.tokens; ++t) {
    for (int64_t h = 0; h < kHidden; ++h) {
      ASSERT_EQ(combined[t * kHidden + h], combined_element(mine, t, h, ranks, n))
          << what << " PE " << pe << " token " << t << " element " << h;
    }
  }
}

class LowLatencyShapes : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(LowLatencyShapes, EveryExpertGetsItsTokensInOrderAndCombineSumsThemBack) {
  const auto [nodes, ranks] = GetParam();
  LocalCluster cluster(cluster_options(nodes, ranks));
  const int n = nodes * ranks;
  std::vector<Batch> batches;
  for (int pe = 0; pe < n; ++pe) batches.push_back(make_batch(pe, 5));
  std::vector<Outcome> outcomes(n);
  cluster.run([&](Pe& pe) {
    LowLatencyBuffer buffer(pe, buffer_shape());
    const Batch& b = batches[pe.my_pe()];
    Outcome& o = outcomes[pe.my_pe()];
    std::vector<const std::byte*> storage;
    for (int call = 0; call < 3; ++call) {  // the halves alternate, then the first is reused
      o.dispatched = buffer.dispatch(b.x.data(), b.routing);
      storage.push_back(o.dispatched.x.data());
      const auto rows = run_experts(o.dispatched, pe.my_pe() * buffer.local_experts());
      if (call < 2) {
        combine(buffer, o, rows.data(), b.routing.tokens);
      } else {  // the experts' output written over the handle's x, as an in-place layer does
        o.x = o.dispatched.x;
        std::memcpy(o.dispatched.x.data(), rows.data(), o.dispatched.x.size());
        o.combined.resize(size_t(b.routing.tokens) * kHidden * 2);
        buffer.combine(o.dispatched, o.dispatched.x.data(), o.combined.data());
      }
      EXPECT_TRUE(o.dispatched.x.empty()) << "combine hands the x storage back";
    }
    // The third dispatch (the first half again) reused the first's rows: no allocation.
    EXPECT_EQ(storage[2], storage[0]);
    barrier_all(pe);
  });
  for (int pe = 0; pe < n; ++pe) {
    expect_outcome(batches, ranks, pe, outcomes[pe],
                   std::to_string(nodes) + "x" + std::to_string(ranks));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LowLatencyShapes,
                         ::testing::Values(std::pair{1, 1}, std::pair{1, 2}, std::pair{2, 2},
                                           std::pair{3, 1}),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "x" +
                                  std::to_string(info.param.second);
                         });

// Rows that add up to more than a CPU's share of the cache are copied with non-temporal
// stores (common/streaming_copy.h): the shape is sized from the threshold, so that path runs,
// and every row still arrives bit for bit, in order, from the token it names.
TEST(LowLatency, RowsPastTheCacheShareArriveBitForBit) {
  constexpr int64_t kWide = 8192;  // 16 KiB bf16 rows
  constexpr int kWideTopk = 8, kWideExperts = 16;
  const size_t row = size_t(kWide) * 2;
  // Each of the 2 PEs receives about tokens x topk rows (its own and its peer's, half each).
  const int64_t tokens = int64_t(streaming_threshold() / row / kWideTopk) * 3 / 2 + 8;
  if (tokens > kMaxLowLatencyTokens) GTEST_SKIP() << "the cache share needs too many tokens";
  LocalClusterOptions options = cluster_options(1, 2);
  options.heap_size = 2 * (size_t(tokens) * (row + 64) * 4 + (16 << 20));
  LocalCluster cluster(options);
  const MoeOptions o = moe_shape(tokens, kWide, kWideTopk, kWideExperts);
  std::vector<Routing> routings;
  std::vector<std::vector<uint16_t>> xs;
  for (int pe = 0; pe < 2; ++pe) {
    routings.push_back(make_routing(o, pe, parse_routing("uniform", 3)));
    xs.push_back(moe_tokens(o, pe, InputSpec{3, ""}));
  }
  cluster.run([&](Pe& pe) {
    LowLatencyBuffer buffer(
        pe, {.max_tokens = tokens, .hidden = kWide, .topk = kWideTopk, .experts = kWideExperts});
    LowLatencyDispatch d = buffer.dispatch(xs[pe.my_pe()].data(), routings[pe.my_pe()]);
    EXPECT_GE(d.x.size(), streaming_threshold()) << "the shape must take the streaming path";
    const int per_pe = buffer.local_experts(), first = pe.my_pe() * per_pe;
    for (int le = 0; le < per_pe; ++le) {
      int64_t routed = 0;
      for (const Routing& r : routings) {
        for (int64_t t = 0; t < r.tokens; ++t) {
          for (int k = 0; k < kWideTopk; ++k) routed += r.expert(t, k) == first + le;
        }
      }
      EXPECT_EQ(d.count(le), routed) << "expert " << first + le;
    }
    for (int le = 0; le < per_pe; ++le) {  // sources in PE order, tokens in order
      for (int64_t slot = d.offset[le]; slot < d.offset[le + 1]; ++slot) {
        const uint16_t* sent = &xs[d.source_pe[slot]][size_t(d.source_token[slot]) * kWide];
        ASSERT_EQ(0, std::memcmp(d.x.data() + size_t(slot) * row, sent, row)) << "row " << slot;
        if (slot > d.offset[le]) {
          EXPECT_LT(std::pair(d.source_pe[slot - 1], d.source_token[slot - 1]),
                    std::pair(d.source_pe[slot], d.source_token[slot]))
              << "row " << slot;
        }
      }
    }
    buffer.release(d);
    barrier_all(pe);
  });
}

// Records across nodes large enough for tcp's borrowed, striped, gathered frames, written by the
// kernel in parts (a small send buffer), two micro-batches in flight: every row arrives bit for
// bit, from the caller's x, while the next dispatch reuses the header staging area.
TEST(LowLatency, WideRowsAcrossNodesArriveBitForBit) {
  constexpr int64_t kWide = 4096;  // 8 KiB bf16 rows
  constexpr int kWideTopk = 4, kWideExperts = 8;
  constexpr int64_t kTokens = 120;
  const size_t row = size_t(kWide) * 2;
  LocalClusterOptions options = cluster_options(2, 2);
  options.heap_size = 2 * (size_t(kTokens) * (row + 64) * 8 + (16 << 20));
  options.tcp.stripe_threshold = 256 << 10;
  options.tcp.send_buffer_bytes = 16 << 10;
  LocalCluster cluster(options);
  const MoeOptions o = moe_shape(kTokens, kWide, kWideTopk, kWideExperts);
  std::vector<Routing> routings[2];
  std::vector<std::vector<uint16_t>> xs[2];
  for (int batch = 0; batch < 2; ++batch) {
    for (int pe = 0; pe < 4; ++pe) {
      routings[batch].push_back(make_routing(o, pe, parse_routing("uniform", 3 + batch)));
      xs[batch].push_back(moe_tokens(o, pe, InputSpec{uint64_t(3 + batch), ""}));
    }
  }
  cluster.run([&](Pe& pe) {
    LowLatencyBuffer buffer(
        pe, {.max_tokens = kTokens, .hidden = kWide, .topk = kWideTopk, .experts = kWideExperts});
    LowLatencyDispatch d[2];
    for (int batch = 0; batch < 2; ++batch)
      d[batch] = buffer.dispatch(xs[batch][pe.my_pe()].data(), routings[batch][pe.my_pe()]);
    for (int batch = 0; batch < 2; ++batch) {
      const auto expected = reference_low_latency_dispatch(o, routings[batch], pe.my_pe());
      ASSERT_EQ(d[batch].offset.size(), expected.size() + 1);
      for (size_t le = 0; le < expected.size(); ++le) {
        ASSERT_EQ(d[batch].count(int(le)), int64_t(expected[le].size())) << "expert " << le;
        for (size_t i = 0; i < expected[le].size(); ++i) {
          const int64_t slot = d[batch].offset[le] + int64_t(i);
          const ReceivedToken& want = expected[le][i];
          const uint16_t* sent = &xs[batch][want.source_pe][size_t(want.source_token) * kWide];
          ASSERT_EQ(0, std::memcmp(d[batch].x.data() + size_t(slot) * row, sent, row))
              << "batch " << batch << " row " << slot;
        }
      }
    }
    buffer.release(d[0]);
    buffer.release(d[1]);
    barrier_all(pe);
  });
}

TEST(LowLatency, TwoMicroBatchesInFlightAndAThirdIsRefused) {
  LocalCluster cluster(cluster_options(2, 2));
  const int n = cluster.n_pes();
  std::vector<Batch> first, second;
  for (int pe = 0; pe < n; ++pe) {
    first.push_back(make_batch(pe, 7));
    second.push_back(make_batch(pe, 8));
  }
  std::vector<Outcome> a(n), b(n);
  std::vector<std::string> errors(n);
  cluster.run([&](Pe& pe) {
    const int me = pe.my_pe();
    LowLatencyBuffer buffer(pe, buffer_shape());
    const int first_expert = me * buffer.local_experts();
    a[me].dispatched = buffer.dispatch(first[me].x.data(), first[me].routing);
    b[me].dispatched = buffer.dispatch(second[me].x.data(), second[me].routing);
    try {
      buffer.dispatch(first[me].x.data(), first[me].routing);
    } catch (const InvalidArgument& e) {
      errors[me] = e.what();
    }
    const auto rows_a = run_experts(a[me].dispatched, first_expert);
    const auto rows_b = run_experts(b[me].dispatched, first_expert);
    combine(buffer, a[me], rows_a.data(), first[me].routing.tokens);
    combine(buffer, b[me], rows_b.data(), second[me].routing.tokens);
    try {
      std::vector<std::byte> again(a[me].combined.size());
      buffer.combine(a[me].dispatched, rows_a.data(), again.data());
      errors[me] += "; a second combine was accepted";
    } catch (const InvalidArgument& e) {
      errors[me] += std::string("; ") + e.what();
    }
    barrier_all(pe);
  });
  for (int pe = 0; pe < n; ++pe) {
    expect_outcome(first, 2, pe, a[pe], "micro-batch A");
    expect_outcome(second, 2, pe, b[pe], "micro-batch B");
    EXPECT_EQ(errors[pe],
              "a low-latency dispatch while the one two dispatches back is not yet combined: "
              "combine it first (two micro-batches may be in flight, each half taken again two "
              "dispatches later); a low-latency combine of a dispatch already combined, or not "
              "this buffer's");
  }
}

TEST(LowLatency, AShapeOrABatchOutOfRangeIsRefusedNamingTheLimit) {
  LocalCluster cluster(cluster_options(1, 2));
  std::vector<std::string> errors(2);
  cluster.run([&](Pe& pe) {
    LowLatencyShape odd = buffer_shape();
    odd.experts = 7;
    try {
      LowLatencyBuffer buffer(pe, odd);
    } catch (const InvalidArgument& e) {
      errors[pe.my_pe()] = e.what();
    }
    LowLatencyShape small = buffer_shape();
    small.max_tokens = 2;
    LowLatencyBuffer buffer(pe, small);
    const Batch b = make_batch(pe.my_pe(), 1);
    try {
      buffer.dispatch(b.x.data(), b.routing);
    } catch (const InvalidArgument& e) {
      errors[pe.my_pe()] += std::string("; ") + e.what();
    }
    barrier_all(pe);
  });
  EXPECT_EQ(errors[0],
            "experts = 7 must spread evenly over the 2 PEs: a multiple of 2; a low-latency "
            "dispatch of 9 tokens with topk 3: the buffer takes at most 2 tokens with topk 3");
}

// Node peers combining different dispatches, or dispatches of different buffers (both the first
// of theirs, so with the same sequence number), would sum rows of different records: the landing
// PE refuses it, naming the peer, instead of reading the wrong rows.
void expect_refused(const std::vector<std::string>& errors) {
  const auto refused = [](int peer) {
    return "a low-latency combine whose node peer PE " + std::to_string(peer) +
           " combines another dispatch, or another buffer's: every PE combines the same one";
  };
  // The first PE to look refuses; its peer may instead see the call aborted by it.
  EXPECT_TRUE(errors[0] == refused(1) || errors[1] == refused(0))
      << errors[0] << " | " << errors[1];
  EXPECT_NE(errors[0], "combined");
  EXPECT_NE(errors[1], "combined");
}

TEST(LowLatency, NodePeersCombiningDifferentDispatchesAreRefused) {
  LocalCluster cluster(cluster_options(1, 2));
  std::vector<std::string> errors(2);
  cluster.run([&](Pe& pe) {
    const int me = pe.my_pe();
    LowLatencyBuffer buffer(pe, buffer_shape());
    const Batch first = make_batch(me, 3), second = make_batch(me, 4);
    Outcome a, b;
    a.dispatched = buffer.dispatch(first.x.data(), first.routing);
    b.dispatched = buffer.dispatch(second.x.data(), second.routing);
    Outcome& mine = me == 0 ? a : b;  // PE 0 combines the first, PE 1 the second
    const auto rows = run_experts(mine.dispatched, me * buffer.local_experts());
    try {
      combine(buffer, mine, rows.data(), (me == 0 ? first : second).routing.tokens);
      errors[me] = "combined";
    } catch (const Error& e) {
      errors[me] = e.what();
    }
  });
  expect_refused(errors);
}

TEST(LowLatency, NodePeersCombiningDispatchesOfDifferentBuffersAreRefused) {
  LocalCluster cluster(cluster_options(1, 2));
  std::vector<std::string> errors(2);
  cluster.run([&](Pe& pe) {
    const int me = pe.my_pe();
    LowLatencyBuffer one(pe, buffer_shape()), other(pe, buffer_shape());
    const Batch batch = make_batch(me, 5);
    Outcome a, b;
    a.dispatched = one.dispatch(batch.x.data(), batch.routing);
    b.dispatched = other.dispatch(batch.x.data(), batch.routing);
    LowLatencyBuffer& buffer = me == 0 ? one : other;
    Outcome& mine = me == 0 ? a : b;
    const auto rows = run_experts(mine.dispatched, me * buffer.local_experts());
    try {
      combine(buffer, mine, rows.data(), batch.routing.tokens);
      errors[me] = "combined";
    } catch (const Error& e) {
      errors[me] = e.what();
    }
  });
  expect_refused(errors);
}

}  // namespace

// A peer's view of a buffer's layout, to write into another PE's region what an honest
// dispatch never would.
struct LowLatencyBufferProbe {
  static std::byte* dispatch_block(const LowLatencyBuffer& b, int half, int source_node) {
    return b.dispatch_block(half, source_node);
  }
  static uint64_t* dispatch_signal(const LowLatencyBuffer& b, int half, int source_node) {
    return b.dispatch_signal(half, source_node);
  }
  static size_t record_bytes(const LowLatencyBuffer& b) { return b.record_bytes(); }
  // A landing signal: the call's sequence number, then the record count.
  static uint64_t signal(uint64_t sequence, uint64_t count) {
    return sequence << LowLatencyBuffer::kCountBits | count;
  }
};

namespace {

// One record as a lying peer sends it: `token`, then per topk slot `expert` in the first and
// -1 in the others, every weight 1.
std::vector<std::byte> forged_record(const LowLatencyBuffer& buffer, int64_t token,
                                     int32_t expert) {
  std::vector<std::byte> record(LowLatencyBufferProbe::record_bytes(buffer));
  std::memcpy(record.data(), &token, sizeof token);
  for (int k = 0; k < kTopk; ++k) {
    const int32_t e = k == 0 ? expert : -1;
    const float weight = 1;
    std::memcpy(record.data() + low_latency_expert_at(k), &e, sizeof e);
    std::memcpy(record.data() + low_latency_weight_at(kTopk, k), &weight, sizeof weight);
  }
  return record;
}

// PE 1 (node 1 of 2 x 1) skips its dispatch and writes `record`, with a signal of `count`
// records, where its records land on PE 0; PE 0's dispatch must refuse them with a PeerError
// naming PE 1 and what was wrong. Then both PEs dispatch and combine honestly on a new buffer:
// the refusal cost nothing but the call.
void expect_lie_refused(int64_t token, int32_t expert, uint64_t count, const std::string& error) {
  LocalCluster cluster(cluster_options(2, 1));
  std::string refused = "not refused";
  std::vector<Outcome> outcomes(2);
  std::vector<Batch> batches{make_batch(0, 7), make_batch(1, 7)};
  cluster.run([&](Pe& pe) {
    const int me = pe.my_pe();
    {
      LowLatencyBuffer buffer(pe, buffer_shape());
      if (me == 0) {
        try {
          buffer.dispatch(batches[0].x.data(), batches[0].routing);
        } catch (const PeerError& e) {
          refused = e.what();
        }
      } else {
        const std::vector<std::byte> record = forged_record(buffer, token, expert);
        pe.put_signal(LowLatencyBufferProbe::dispatch_block(buffer, 0, 1), record.data(),
                      record.size(), LowLatencyBufferProbe::dispatch_signal(buffer, 0, 1),
                      LowLatencyBufferProbe::signal(1, count), SignalOp::kSet, 0);
      }
      barrier_all(pe);  // PE 0 has read what PE 1 wrote before the regions go
    }
    LowLatencyBuffer buffer(pe, buffer_shape());
    Outcome& o = outcomes[me];
    o.dispatched = buffer.dispatch(batches[me].x.data(), batches[me].routing);
    const auto rows = run_experts(o.dispatched, me * buffer.local_experts());
    combine(buffer, o, rows.data(), batches[me].routing.tokens);
    barrier_all(pe);
  });
  EXPECT_EQ(refused, error);
  for (int pe = 0; pe < 2; ++pe) expect_outcome(batches, 1, pe, outcomes[pe], "after the lie");
}

TEST(LowLatencyLyingPeer, MoreRecordsThanABlockHoldsAreRefused) {
  expect_lie_refused(0, 0, kMaxTokens + 1, "PE 1 signalled 10 low-latency records; at most 9 fit");
}

TEST(LowLatencyLyingPeer, ARecordForAnExpertOfAnotherNodeIsRefused) {
  expect_lie_refused(0, kExperts - 1, 1,
                     "PE 1 sent node 0 a record for expert 11; it holds 0 to 5");
}

TEST(LowLatencyLyingPeer, ARecordOfATokenOutsideTheBufferIsRefused) {
  expect_lie_refused(77, 0, 1, "PE 1 sent a record of token 77; a PE has at most 9");
  expect_lie_refused(-1, 0, 1, "PE 1 sent a record of token -1; a PE has at most 9");
}

}  // namespace
}  // namespace symmesh
