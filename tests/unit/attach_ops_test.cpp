// The calls an attached process makes on its own tensors, through the staging area: MoE dispatch
// and combine with DeepEP's semantics (what each PE receives, in which order, with which local
// expert indices; the combine's sums and bias; a backward combine of another width), tokens,
// expert rows and combined tokens on the heap used where they lie, outputs lent where they
// lie in the staging area, a hostile place, heap or staging offset refused, the three fused ops
// against a plain matmul, a wrong routing or a mask of active nodes without this one refused
// before anything is sent, PEs whose calls disagree all refused together, and the wait
// statistics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <future>
#include <mutex>
#include <vector>

#include "api/op_limits.h"
#include "api/staging_layout.h"
#include "runtime/layout.h"
#include "tests/support/attached_moe_routing.h"
#include "tests/support/attached_node.h"

namespace symmesh {

// Requests no honest client writes, on 2 f32 tokens of width 8 (topk 2 of 4 experts).
struct SessionProbe {
  // A dispatch whose x lies at `place` and heap offset `src`, with the routing staged, and
  // whose recv_x goes to `out` at heap offset `dst` (`dst_bytes` of room).
  static void dispatch_at(Session& session, attach::Place place, uint64_t src,
                          attach::Place out = attach::Place::kStaging, uint64_t dst = 0,
                          uint64_t dst_bytes = 0) {
    staged_dispatch(session, [&](attach::Request& request) {
      request.input_place = place;
      request.src = src;
      request.output_place = out;
      request.dst = dst;
      request.dst_bytes = dst_bytes;
    });
  }
  // A dispatch whose outputs, past a room of none, go to staging offset `spill_at`.
  static void dispatch_spilling_to(Session& session, uint64_t spill_at) {
    staged_dispatch(session, [&](attach::Request& request) {
      request.stage_room = 0;
      request.spill_at = spill_at;
    });
  }
  // An honest dispatch, then a combine of its rows whose output goes to `place` at heap offset
  // `dst`, or to staging offset `spill_at` when given (past a room of none). Returns the staging
  // area's size after it.
  static uint64_t combine_to(Session& session, attach::Place place, uint64_t dst,
                             uint64_t spill_at = 0) {
    const Session::MoeTokens t = tokens();
    std::vector<float> recv(2 * 2 * 8), recv_weights(2 * 2 * 2);
    std::vector<int64_t> recv_idx(2 * 2 * 2);
    const auto handle = session.dispatch(
        t.x, t.topk_idx, t.topk_weights, t.tokens, t.hidden, t.topk, t.experts, t.dtype,
        [&](int64_t) {
          return DispatchOutputs{recv.data(), recv_idx.data(), recv_weights.data()};
        });
    attach::Request request{.op = attach::Op::kCombine,
                            .dtype = uint32_t(wire::DATA_TYPE_F32),
                            .count = uint64_t(handle->received),
                            .args = {handle->id_, 0, 8}};
    const auto block = attach::combine_block(request.count, 2, 8, false, 4);
    const std::lock_guard staging_held(session.staging_mutex_);
    session.place_input(request, recv.data(), request.count * 8 * 4,
                        session.stage(request, block.end, 2 * 8 * 4) + block.rows, 4);
    request.output_place = place;
    request.dst = dst;
    if (spill_at != 0) {
      request.stage_room = 0;
      request.spill_at = spill_at;
    }
    session.call(request);
    return session.staging_->bytes();
  }
  // The first byte of the PE's slice: the daemon's own state, not the process's heap.
  static float* slice_start(Session& session) { return reinterpret_cast<float*>(session.slice_); }
  // The first byte of the heap the process may name: where the first region made in it lies.
  static std::byte* heap_start(Session& session) { return session.slice_ + session.heap_start_; }
  // A request as written, with no check of the library's.
  static void raw(Session& session, const attach::Request& request) { session.call(request); }
  // The heap offset of `address` (in this PE's slice).
  static uint64_t offset(Session& session, const void* address) {
    return uint64_t(static_cast<const std::byte*>(address) - session.slice_);
  }

 private:
  // The dispatch of tokens(), staged as an honest process would, then changed by `hostile`.
  template <class Change>
  static void staged_dispatch(Session& session, Change hostile) {
    attach::Request request{.op = attach::Op::kDispatch,
                            .dtype = uint32_t(wire::DATA_TYPE_F32),
                            .count = 2,
                            .args = {8, 2, 4}};
    const std::lock_guard staging_held(session.staging_mutex_);
    session.stage_tokens("dispatch", tokens(), kMaxMoeTokens, 0, request);
    hostile(request);
    session.call(request);
  }
  static Session::MoeTokens tokens() {
    static const std::vector<int64_t> ids = {0, 1, 2, 3};
    static const std::vector<float> x(16), weights(4, 1.0f);
    return {x.data(), ids.data(), weights.data(), 2, 8, 2, 4, wire::DATA_TYPE_F32};
  }
};

namespace {

struct AttachedOps : AttachedNode {
  // After a session that ended in a refusal: reset as the node agent does between jobs, then a
  // full dispatch + combine session on the same node.
  void serves_the_next_session();
};

using namespace attached_moe;

struct MoeOutcome {
  std::vector<float> recv_x;
  std::vector<int64_t> recv_idx;
  std::vector<float> recv_weights;
  std::vector<float> combined;
  std::vector<float> weight_grads;  // [tokens][8]: a combine of recv weights, 8 wide
};

// PE pe's tokens and routing.
struct MoeInputs {
  std::vector<float> x = std::vector<float>(kTokens * kHidden);
  std::vector<float> weights = std::vector<float>(kTokens * kTopk);
  std::vector<int64_t> idx = std::vector<int64_t>(kTokens * kTopk);
};

MoeInputs moe_inputs(int pe) {
  MoeInputs in;
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t h = 0; h < kHidden; ++h) in.x[t * kHidden + h] = token_value(pe, t, h);
    for (int k = 0; k < kTopk; ++k) {
      in.idx[t * kTopk + k] = expert_of(pe, t, k);
      in.weights[t * kTopk + k] = 0.25f * float(k + 1);
    }
  }
  return in;
}

// The experts: expert e of this PE scales its token by (local index + 1), weighted.
std::vector<float> expert_rows(const float* recv_x, const MoeOutcome& got, int64_t received) {
  std::vector<float> rows(received * kHidden, 0.0f);
  for (int64_t i = 0; i < received; ++i) {
    for (int k = 0; k < kTopk; ++k) {
      const int64_t local = got.recv_idx[i * kTopk + k];
      if (local < 0) continue;
      const float w = got.recv_weights[i * kTopk + k];
      for (int64_t h = 0; h < kHidden; ++h) {
        rows[i * kHidden + h] += w * float(local + 1) * recv_x[i * kHidden + h];
      }
    }
  }
  return rows;
}

const std::vector<float> kBias(kTokens* kHidden, 0.5f);

MoeOutcome run_moe(Session& session, int pe) {
  const MoeInputs in = moe_inputs(pe);
  MoeOutcome out;
  auto handle = session.dispatch(
      in.x.data(), in.idx.data(), in.weights.data(), kTokens, kHidden, kTopk, kExperts,
      wire::DATA_TYPE_F32, [&](int64_t received) {
        out.recv_x.resize(received * kHidden);
        out.recv_idx.resize(received * kTopk);
        out.recv_weights.resize(received * kTopk);
        return DispatchOutputs{out.recv_x.data(), out.recv_idx.data(), out.recv_weights.data()};
      });
  const int64_t received = handle->received;
  const std::vector<float> rows = expert_rows(out.recv_x.data(), out, received);
  std::vector<float> weight_rows(received * 8, 0.0f);
  for (int64_t i = 0; i < received; ++i) {
    for (int k = 0; k < kTopk; ++k) {
      if (out.recv_idx[i * kTopk + k] >= 0)
        weight_rows[i * 8 + k] = out.recv_weights[i * kTopk + k];
    }
  }
  out.combined.resize(kTokens * kHidden);
  session.combine(*handle, rows.data(), kHidden, wire::DATA_TYPE_F32, kBias.data(),
                  out.combined.data());
  out.weight_grads.resize(kTokens * 8);
  session.combine(*handle, weight_rows.data(), 8, wire::DATA_TYPE_F32, nullptr,
                  out.weight_grads.data());
  return out;
}

void AttachedOps::serves_the_next_session() {
  node_.reset_between_jobs();
  auto pes = start_session();
  const std::vector<MoeOutcome> outcomes = run_processes(run_moe);
  for (const MoeOutcome& outcome : outcomes) {
    EXPECT_EQ(outcome.combined.size(), size_t(kTokens * kHidden));
  }
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

TEST_F(AttachedOps, DispatchDeliversEachTokenOnceInOrderAndCombineSumsItBack) {
  auto pes = start_session();
  const std::vector<MoeOutcome> outcomes = run_processes(run_moe);
  for (int pe = 0; pe < 2; ++pe) {
    const MoeOutcome& got = outcomes[pe];
    // What PE `pe` must receive: by source PE, then token, each token with an expert here once.
    int64_t i = 0;
    for (int source = 0; source < 2; ++source) {
      for (int64_t t = 0; t < kTokens; ++t) {
        bool here = false;
        for (int k = 0; k < kTopk; ++k) {
          const int64_t e = expert_of(source, t, k);
          here |= e >= 0 && e / 2 == pe;
        }
        if (!here) continue;
        ASSERT_LT(i, int64_t(got.recv_x.size() / kHidden)) << "PE " << pe << " got too few";
        EXPECT_EQ(got.recv_x[i * kHidden + 3], token_value(source, t, 3)) << "PE " << pe;
        for (int k = 0; k < kTopk; ++k) {
          const int64_t e = expert_of(source, t, k);
          EXPECT_EQ(got.recv_idx[i * kTopk + k], e >= 0 && e / 2 == pe ? e % 2 : -1);
          EXPECT_EQ(got.recv_weights[i * kTopk + k], 0.25f * float(k + 1));
        }
        ++i;
      }
    }
    EXPECT_EQ(i, int64_t(got.recv_x.size() / kHidden)) << "PE " << pe << " got too many";
    // combined: per token, sum over its experts of w * (e % 2 + 1) * x, plus the bias.
    for (int64_t t = 0; t < kTokens; ++t) {
      for (int64_t h = 0; h < kHidden; ++h) {
        float want = 0.5f;
        for (int k = 0; k < kTopk; ++k) {
          const int64_t e = expert_of(pe, t, k);
          if (e >= 0) want += 0.25f * float(k + 1) * float(e % 2 + 1) * token_value(pe, t, h);
        }
        EXPECT_NEAR(got.combined[t * kHidden + h], want, 1e-5f * std::fabs(want))
            << "PE " << pe << " token " << t;
      }
      for (int k = 0; k < kTopk; ++k) {  // every weight comes back from the PE of its expert
        const float want = expert_of(pe, t, k) < 0 ? 0.0f : 0.25f * float(k + 1);
        EXPECT_EQ(got.weight_grads[t * 8 + k], want) << "PE " << pe << " token " << t;
      }
    }
  }
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

// A dispatch's recv_x and a combine's result lent where the daemon wrote them hold the bytes the
// copying calls give. A whole dispatch and combine after them goes around them (their bytes stay),
// they go back to the area when dropped, and one kept outlives its session.
struct LentOutcome {
  std::string error;
  std::shared_ptr<StagingLoan> kept;  // the combine's, past the session's end
  std::vector<float> want;
};

bool holds(const std::shared_ptr<StagingLoan>& loan, const std::vector<float>& want) {
  return loan && loan->bytes() == want.size() * sizeof(float) &&
         std::memcmp(loan->data(), want.data(), loan->bytes()) == 0;
}

TEST_F(AttachedOps, LentOutputsHoldTheCopiedBytesAndLaterCallsGoAroundThem) {
  auto pes = start_session();
  std::vector<LentOutcome> outcomes = run_processes([](Session& session, int pe) {
    LentOutcome outcome;
    const MoeOutcome copied = run_moe(session, pe);
    const MoeInputs in = moe_inputs(pe);
    MoeOutcome got;
    std::shared_ptr<StagingLoan> recv_x;
    auto handle = session.dispatch(
        in.x.data(), in.idx.data(), in.weights.data(), kTokens, kHidden, kTopk, kExperts,
        wire::DATA_TYPE_F32,
        [&](int64_t received) {
          got.recv_idx.resize(received * kTopk);
          got.recv_weights.resize(received * kTopk);
          return DispatchOutputs{nullptr, got.recv_idx.data(), got.recv_weights.data()};
        },
        {}, &recv_x);
    if (!holds(recv_x, copied.recv_x)) outcome.error += "recv_x differs; ";
    const std::vector<float> rows =
        expert_rows(reinterpret_cast<const float*>(recv_x->data()), got, handle->received);
    std::shared_ptr<StagingLoan> combined =
        session.combine(*handle, rows.data(), kHidden, wire::DATA_TYPE_F32, kBias.data());
    if (!holds(combined, copied.combined)) outcome.error += "the combine's result differs; ";
    if (session.loans_outstanding() != 2) outcome.error += "not 2 loans; ";
    // Rows wide enough that the result lies past the area the inputs needed: each token comes
    // back once from every PE that received it.
    constexpr int64_t kWide = kMaxMoeHidden;
    const std::vector<float> ones(size_t(handle->received) * kWide, 1.0f);
    const auto wide = session.combine(*handle, ones.data(), kWide, wire::DATA_TYPE_F32, nullptr);
    for (int64_t t = 0; t < kTokens; ++t) {
      const float pes_of_t = t % 3 == 0 || (t + pe) % 2 == 0 ? 1.0f : 2.0f;
      const auto* row = reinterpret_cast<const float*>(wide->data()) + t * kWide;
      if (row[0] != pes_of_t || row[kWide - 1] != pes_of_t) outcome.error += "a wide row differs; ";
    }
    run_moe(session, pe);  // its staged blocks go around the loans
    if (!holds(recv_x, copied.recv_x)) outcome.error += "a later call wrote over recv_x; ";
    if (!holds(combined, copied.combined)) outcome.error += "a later call wrote over the result; ";
    recv_x.reset();
    if (session.loans_outstanding() != 2) outcome.error += "recv_x was not given back; ";
    outcome.kept = std::move(combined);
    outcome.want = copied.combined;
    return outcome;
  });
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
  for (const LentOutcome& outcome : outcomes) {
    EXPECT_EQ(outcome.error, "");
    EXPECT_TRUE(holds(outcome.kept, outcome.want)) << "the loan lost its bytes with its session";
  }
}

// Tokens and rows the process made on its heap are read there, not through the staging area:
// twice the tokens on the heap arrive as twice the rows, and twice the rows on the heap give
// exactly twice the sums (a read of the staging area, which still holds the call before's,
// would give the same again). A dispatch's received tokens and a combine's output go onto the
// heap when the process offers it (the library copies nothing out then). Then the staging path
// once more.
TEST_F(AttachedOps, TensorsOnTheHeapAreReadAndWrittenWhereTheyLie) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& session, int pe) -> std::string {
    std::vector<float> x(kTokens * kHidden), weights(kTokens * kTopk, 1.0f);
    std::vector<int64_t> idx(kTokens * kTopk);
    for (int64_t t = 0; t < kTokens; ++t) {
      for (int64_t h = 0; h < kHidden; ++h) x[t * kHidden + h] = token_value(pe, t, h);
      for (int k = 0; k < kTopk; ++k) idx[t * kTopk + k] = expert_of(pe, t, k);
    }
    std::vector<float> recv_x, recv_weights;
    std::vector<int64_t> recv_idx;
    auto handle = session.dispatch(
        x.data(), idx.data(), weights.data(), kTokens, kHidden, kTopk, kExperts,
        wire::DATA_TYPE_F32, [&](int64_t received) {
          recv_x.resize(received * kHidden);
          recv_idx.resize(received * kTopk);
          recv_weights.resize(received * kTopk);
          return DispatchOutputs{recv_x.data(), recv_idx.data(), recv_weights.data()};
        });
    // Tokens on the heap, twice the private ones: twice the rows arrive.
    auto* heap_x = static_cast<float*>(session.malloc(kTokens * kHidden * sizeof(float)));
    for (size_t i = 0; i < x.size(); ++i) heap_x[i] = 2 * x[i];
    std::vector<float> recv_twice;
    session.dispatch(
        heap_x, idx.data(), weights.data(), kTokens, kHidden, kTopk, kExperts, wire::DATA_TYPE_F32,
        [&](int64_t received) {
          recv_twice.resize(received * kHidden);
          return DispatchOutputs{recv_twice.data(), recv_idx.data(), recv_weights.data()};
        });
    session.free(heap_x);
    if (recv_twice.size() != recv_x.size()) return "the tokens on the heap arrived otherwise";
    for (size_t i = 0; i < recv_x.size(); ++i) {
      if (recv_twice[i] != 2 * recv_x[i]) {
        return "received element " + std::to_string(i) + ": " + std::to_string(recv_twice[i]) +
               " from tokens on the heap, not twice " + std::to_string(recv_x[i]);
      }
    }
    // Three times the tokens, received into a room on the heap (over a fill no token has) when
    // they fit, exactly or with rows to spare, whether allocate() answers the room (nothing is
    // copied) or other memory (copied from the room); through the staging area, the room left
    // alone, when it is a row short or empty.
    std::vector<float> x3(x.size());
    for (size_t i = 0; i < x.size(); ++i) x3[i] = 3 * x[i];
    const int64_t arrived = int64_t(recv_x.size()) / kHidden;
    const size_t room_floats = 2 * kTokens * kHidden;
    auto* room = static_cast<float*>(session.malloc(room_floats * sizeof(float)));
    for (const int64_t rows : {2 * kTokens, arrived, arrived - 1, int64_t(0)}) {
      std::fill(room, room + room_floats, -7.0f);
      std::vector<float> elsewhere;
      float* got = nullptr;
      session.dispatch(
          x3.data(), idx.data(), weights.data(), kTokens, kHidden, kTopk, kExperts,
          wire::DATA_TYPE_F32,
          [&](int64_t received) {
            elsewhere.resize(received * kHidden);
            got = rows == 2 * kTokens ? room : elsewhere.data();
            return DispatchOutputs{got, recv_idx.data(), recv_weights.data()};
          },
          RecvRoom{room, rows});
      const bool fits = arrived <= rows;
      for (size_t i = 0; i < recv_x.size(); ++i) {
        if (got[i] != 3 * recv_x[i] || (room[i] == 3 * recv_x[i]) != fits) {
          return "a room of " + std::to_string(rows) + " rows for " + std::to_string(arrived) +
                 ": element " + std::to_string(i) + " got " + std::to_string(got[i]) +
                 ", the room holds " + std::to_string(room[i]) + ", the token is " +
                 std::to_string(3 * recv_x[i]);
        }
      }
    }
    session.free(room);
    auto* heap = static_cast<float*>(session.malloc(2 * kTokens * kHidden * sizeof(float)));
    for (size_t i = 0; i < recv_x.size(); ++i) heap[i] = 2 * recv_x[i];
    // The combined tokens written onto the heap, over a fill no combine gives.
    auto* heap_out = static_cast<float*>(session.malloc(kTokens * kHidden * sizeof(float)));
    std::fill(heap_out, heap_out + kTokens * kHidden, -7.0f);
    std::vector<float> once(kTokens * kHidden), twice(kTokens * kHidden), again(kTokens * kHidden);
    session.combine(*handle, recv_x.data(), kHidden, wire::DATA_TYPE_F32, nullptr, once.data());
    session.combine(*handle, heap, kHidden, wire::DATA_TYPE_F32, nullptr, twice.data());
    session.combine(*handle, recv_x.data(), kHidden, wire::DATA_TYPE_F32, nullptr, heap_out);
    session.combine(*handle, recv_x.data(), kHidden, wire::DATA_TYPE_F32, nullptr, again.data());
    const std::vector<float> written(heap_out, heap_out + kTokens * kHidden);
    session.free(heap_out);
    session.free(heap);
    for (size_t i = 0; i < once.size(); ++i) {
      if (twice[i] != 2 * once[i] || written[i] != once[i] || again[i] != once[i]) {
        return "element " + std::to_string(i) + ": " + std::to_string(once[i]) + ", then " +
               std::to_string(twice[i]) + " from the heap's rows, " + std::to_string(written[i]) +
               " written on the heap, then " + std::to_string(again[i]);
      }
    }
    return "ok";
  });
  EXPECT_EQ(said, std::vector<std::string>(2, "ok"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

// A process names where its input, a dispatch's recv_x and a combine's output lie; a place that
// is neither staging nor heap, an offset past the heap or into its reserved start, and a misaligned
// one are each refused naming what was wrong. Each ends that session only: the node serves the next
// one.
TEST_F(AttachedOps, AHostilePlaceOrHeapOffsetIsRefusedNamingIt) {
  enum class Tensor {
    kDispatchX,
    kRecvX,
    kRecvXRoomPastTheHeap,
    kRecvXOverX,
    kCombineOut,
    kSpilledOverX
  };
  struct Case {
    Tensor tensor;
    attach::Place place;
    uint64_t offset;
    std::string says;
  };
  const std::vector<Case> cases = {
      {Tensor::kDispatchX, attach::Place(7), 0,
       "dispatch's x is at place 7: allowed 0 (the staging area) or 1 (the symmetric heap at "
       "src)"},
      {Tensor::kDispatchX, attach::Place::kHeap, UINT64_MAX - 3, "are outside its symmetric heap"},
      {Tensor::kDispatchX, attach::Place::kHeap, 0, "are outside its symmetric heap"},
      {Tensor::kDispatchX, attach::Place::kHeap, kReservedBytes + 2,
       "dispatch's x at heap offset " + std::to_string(kReservedBytes + 2) +
           " is not aligned to its 4-byte element"},
      {Tensor::kRecvX, attach::Place(8), 0,
       "dispatch's recv_x is at place 8: allowed 0 (the staging area) or 1 (the symmetric heap "
       "at dst)"},
      {Tensor::kRecvX, attach::Place::kHeap, UINT64_MAX - 3, "are outside its symmetric heap"},
      {Tensor::kRecvX, attach::Place::kHeap, 0, "are outside its symmetric heap"},
      {Tensor::kRecvX, attach::Place::kHeap, kReservedBytes + 1,
       "dispatch's recv_x at heap offset " + std::to_string(kReservedBytes + 1) +
           " is not aligned to its 4-byte element"},
      {Tensor::kRecvXRoomPastTheHeap, attach::Place::kHeap, kReservedBytes,
       "are outside its symmetric heap"},
      {Tensor::kRecvXOverX, attach::Place::kHeap, kReservedBytes + 32,
       "dispatch's recv_x at heap offset " + std::to_string(kReservedBytes + 32) +
           " (128 bytes) overlaps dispatch's x at " + std::to_string(kReservedBytes) +
           " (64 bytes): allowed separate tensors"},
      {Tensor::kSpilledOverX, attach::Place::kStaging, 64,
       "staging offset spill_at = 64 is not past the call's inputs, [0, 192): allowed 192 or "
       "more"},
      {Tensor::kCombineOut, attach::Place(9), 0,
       "combine's output is at place 9: allowed 0 (the staging area) or 1 (the symmetric heap "
       "at dst)"},
      {Tensor::kCombineOut, attach::Place::kHeap, 0, "are outside its symmetric heap"},
      {Tensor::kCombineOut, attach::Place::kHeap, kReservedBytes + 6,
       "combine's output at heap offset " + std::to_string(kReservedBytes + 6) +
           " is not aligned to its 4-byte element"},
  };
  for (const Case& c : cases) {
    auto pes = start_session();
    const std::vector<std::string> said = run_processes([&](Session& session, int) {
      try {
        switch (c.tensor) {
          case Tensor::kDispatchX:
            SessionProbe::dispatch_at(session, c.place, c.offset);
            break;
          case Tensor::kRecvX:  // room for 4 rows of 8 floats
            SessionProbe::dispatch_at(session, attach::Place::kStaging, 0, c.place, c.offset, 128);
            break;
          case Tensor::kRecvXRoomPastTheHeap:
            SessionProbe::dispatch_at(session, attach::Place::kStaging, 0, c.place, c.offset,
                                      UINT64_MAX);
            break;
          case Tensor::kRecvXOverX:  // x at the heap's first byte, the room half over it
            SessionProbe::dispatch_at(session, attach::Place::kHeap, kReservedBytes, c.place,
                                      c.offset, 128);
            break;
          case Tensor::kCombineOut:
            SessionProbe::combine_to(session, c.place, c.offset);
            break;
          case Tensor::kSpilledOverX:
            SessionProbe::dispatch_spilling_to(session, c.offset);
            break;
        }
        return std::string("accepted");
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
    });
    SCOPED_TRACE(c.says);
    expect_named_or_aborted(said, c.says);
    expect_named_or_aborted(endings(pes), c.says);
    node_.reset_between_jobs();  // as the node agent does: the aborted session's sync state
  }
  serves_the_next_session();
}

// One hostile PE among honest ones: the PEs agree on the call (where each one's tensors lie is
// its own), PE 0's daemon refuses its room naming it, and that ends the session on PE 1 too,
// which was inside the collective dispatch waiting for PE 0, with the abort's error rather
// than a hang. The node serves the next session.
TEST_F(AttachedOps, OneHostilePeEndsTheCallOnEveryPeAndTheNodeServesTheNext) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& session, int pe) {
    try {
      SessionProbe::dispatch_at(session, attach::Place::kStaging, 0,
                                pe == 0 ? attach::Place(8) : attach::Place::kStaging, 0, 0);
      return std::string("accepted");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  });
  EXPECT_NE(said[0].find("dispatch's recv_x is at place 8"), std::string::npos) << said[0];
  EXPECT_NE(said[1].find("the session ended"), std::string::npos) << said[1];
  const std::vector<std::string> ended = endings(pes);
  EXPECT_NE(ended[0].find("dispatch's recv_x is at place 8"), std::string::npos) << ended[0];
  EXPECT_NE(ended[1], "ok");
  serves_the_next_session();
}

// Wait statistics, as DeepEP keeps them: an entry per PE, within the PE's total; a PE number
// outside the world is refused naming it, and the node serves the next session.
TEST_F(AttachedOps, WaitStatsGiveEveryPeWithinTheTotalAndRefuseAPeOutsideTheWorld) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& session, int pe) {
    session.barrier();
    const Session::WaitStats stats = session.wait_stats();
    double sum = 0;
    for (double seconds : stats.wait_by_peer_s) sum += seconds;
    EXPECT_EQ(stats.wait_by_peer_s.size(), size_t(session.place().world_size));
    EXPECT_LE(sum, stats.blocked_s + 1e-9);
    session.barrier();
    if (pe != 0) return std::string("ok");
    attach::Request hostile{.op = attach::Op::kWaitStats};
    hostile.args[0] = 1000;
    try {
      SessionProbe::raw(session, hostile);
      return std::string("accepted");
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
  });
  EXPECT_NE(said[0].find("wait stats: PE 1000 is outside 0.."), std::string::npos) << said[0];
  endings(pes);
  serves_the_next_session();
}

// The slice's start holds the daemon's own state (its sync words): the library refuses a
// pointer there before anything is sent, as one off the heap, and the session goes on.
TEST_F(AttachedOps, APointerIntoTheDaemonsStateIsRefusedBeforeAnythingIsSent) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& session, int) -> std::string {
    float* reserved = SessionProbe::slice_start(session);
    if (session.on_heap(reserved, 16)) return "the slice's start counts as heap";
    try {
      session.all_reduce(reserved, reserved, 4, wire::DATA_TYPE_F32);
      return "a pointer into the daemon's state was taken";
    } catch (const InvalidArgument& e) {
      if (std::string(e.what()).find("not on this PE's symmetric heap") == std::string::npos) {
        return e.what();
      }
    }
    auto* t = static_cast<float*>(session.malloc(4 * sizeof(float)));
    std::fill(t, t + 4, 1.0f);
    session.all_reduce(t, t, 4, wire::DATA_TYPE_F32);
    const float sum = t[0];
    session.free(t);
    return sum == 2.0f ? "ok" : "the next all_reduce gave " + std::to_string(sum);
  });
  EXPECT_EQ(said, std::vector<std::string>(2, "ok"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

// A combine's output past the staging area's end (the process grows the area for a call's
// inputs only) grows it: the daemon writes it there, and the process maps it.
TEST_F(AttachedOps, AnOutputPastTheStagingAreaGrowsIt) {
  auto pes = start_session();
  constexpr uint64_t kFar = uint64_t{48} << 20;
  const auto sizes = run_processes([](Session& session, int) {
    return SessionProbe::combine_to(session, attach::Place::kStaging, 0, kFar);
  });
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
  for (const uint64_t size : sizes) EXPECT_EQ(size, uint64_t{64} << 20);
}

// An output over its own input on the heap is refused by the library, naming both, before
// anything is sent (the daemon's own refusal would end the session): the session goes on.
TEST_F(AttachedOps, AnOutputOverItsInputIsRefusedBeforeAnythingIsSent) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& session, int) -> std::string {
    std::vector<float> weights(kTokens * kTopk, 1.0f);
    std::vector<int64_t> idx(kTokens * kTopk);
    for (int64_t t = 0; t < kTokens; ++t) {
      for (int k = 0; k < kTopk; ++k) idx[t * kTopk + k] = expert_of(0, t, k);
    }
    const size_t x_floats = kTokens * kHidden, room_floats = 2 * kTokens * kHidden;
    auto* heap = static_cast<float*>(session.malloc((x_floats + room_floats) * sizeof(float)));
    std::fill(heap, heap + x_floats + room_floats, 1.0f);
    std::vector<float> recv_x, recv_weights;
    std::vector<int64_t> recv_idx;
    const auto dispatch = [&](RecvRoom room) {
      return session.dispatch(
          heap, idx.data(), weights.data(), kTokens, kHidden, kTopk, kExperts, wire::DATA_TYPE_F32,
          [&](int64_t received) {
            recv_x.resize(received * kHidden);
            recv_idx.resize(received * kTopk);
            recv_weights.resize(received * kTopk);
            return DispatchOutputs{recv_x.data(), recv_idx.data(), recv_weights.data()};
          },
          room);
    };
    const RecvRoom over_x{heap + x_floats - kHidden, 2 * kTokens};  // from x's last row on
    std::string bad = refusal_missing([&] { dispatch(over_x); }, "dispatch's out at heap offset",
                                      "overlaps dispatch's x");
    if (!bad.empty()) return "dispatch: " + bad;
    auto handle = dispatch(RecvRoom{heap + x_floats, 2 * kTokens});
    float* rows = heap + x_floats;  // recv_x, where the room took it
    std::vector<float> out(kTokens * kHidden);
    bad = refusal_missing(
        [&] { session.combine(*handle, rows, kHidden, wire::DATA_TYPE_F32, nullptr, rows + 8); },
        "combine's out at heap offset", "overlaps combine's expert rows");
    if (!bad.empty()) return "combine: " + bad;
    session.combine(*handle, rows, kHidden, wire::DATA_TYPE_F32, nullptr, out.data());
    std::vector<float> want(out.size());
    session.combine(*handle, recv_x.data(), kHidden, wire::DATA_TYPE_F32, nullptr, want.data());
    session.free(heap);
    if (out != want || want[0] == 0.0f) return "the combine after the refusals differs";
    return "ok";
  });
  EXPECT_EQ(said, std::vector<std::string>(2, "ok"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

// free takes only what the process's malloc answered: the low-latency buffer the daemon made
// in the PE's heap (the heap's first region here), or a block freed already, is refused naming
// the offset (a buffer freed under the daemon would be freed twice when the session ends). The
// refusal ends that session only: the node serves the next one.
// The daemon's own regions on a peer (its sync pool, a call's rings, the low-latency buffer) are
// never a one-sided call's to read or write: only what the process's malloc answered.
TEST_F(AttachedOps, AOneSidedCallOutsideTheProcesssAllocationsIsRefusedNamingIt) {
  const struct {
    const char* says;
    attach::Op op;
    int shift_source, shift_destination, shift_signal;  // in 64-byte steps past the block
  } cases[] = {
      {"get's source (on PE", attach::Op::kGet, 2, 0, -1},
      {"put_signal's destination (on PE", attach::Op::kPutSignal, 0, 2, 0},
      {"put_signal's signal word (on PE", attach::Op::kPutSignal, 0, 0, 2},
  };
  for (const auto& bad : cases) {
    SCOPED_TRACE(bad.says);
    auto pes = start_session();
    const std::vector<std::string> said = run_processes([&](Session& session, int pe) {
      // Both PEs are served before either refusal ends the session: a process that attached
      // after its PE's session job ended would wait for the next session instead.
      session.barrier();
      try {
        auto* block = static_cast<std::byte*>(session.malloc(128));
        const uint64_t at = SessionProbe::offset(session, block);
        const auto past = [&](int steps) { return at + uint64_t(std::max(steps, 0)) * 64; };
        attach::Request request{.op = bad.op,
                                .src = past(bad.shift_source),
                                .dst = past(bad.shift_destination),
                                .count = 64,
                                .args = {uint64_t(1 - pe), 0, 1}};
        if (bad.shift_signal >= 0) request.args[1] = past(bad.shift_signal) + 64 - 8;
        SessionProbe::raw(session, request);
        return std::string("accepted");
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
    });
    expect_named_or_aborted(said, bad.says);
    expect_named_or_aborted(endings(pes), "not inside an allocation this process's malloc");
    node_.reset_between_jobs();
  }
  serves_the_next_session();
}

TEST_F(AttachedOps, AFreeOfWhatMallocDidNotAnswerIsRefusedNamingIt) {
  for (const bool twice : {false, true}) {
    SCOPED_TRACE(twice ? "a block freed twice" : "the daemon's low-latency buffer");
    auto pes = start_session();
    const std::vector<std::string> said = run_processes([&](Session& session, int pe) {
      std::vector<float> x(kTokens * kHidden), weights(kTokens * kTopk, 1.0f), recv;
      std::vector<int64_t> idx(kTokens * kTopk), counts(kExperts / 2);
      for (int64_t t = 0; t < kTokens; ++t) {
        for (int k = 0; k < kTopk; ++k) idx[t * kTopk + k] = expert_of(pe, t, k);
      }
      auto handle = session.low_latency_dispatch(
          x.data(), idx.data(), weights.data(), kTokens, kHidden, kTopk, kExperts, 8,
          wire::DATA_TYPE_F32, [&](int64_t received) {
            recv.resize(received * kHidden);
            return LowLatencyOutputs{recv.data(), counts.data()};
          });
      try {
        if (twice) {
          void* block = session.malloc(64);
          session.free(block);
          session.free(block);
        } else {
          session.free(SessionProbe::heap_start(session));
        }
        return std::string("accepted");
      } catch (const std::exception& e) {
        return std::string(e.what());
      }
    });
    const std::string says = "is not an allocation this process's malloc answered";
    expect_named_or_aborted(said, says);
    expect_named_or_aborted(endings(pes), says);
    node_.reset_between_jobs();  // as the node agent does: the aborted session's sync state
  }
  serves_the_next_session();
}

// What a fused call makes the daemon hold (its copies of A, B and the result) is bounded by
// the node's --job-memory over its PEs: past it the call is refused naming the flag, so one
// process cannot take the host's memory.
TEST_F(AttachedOps, AFusedCallPastTheDaemonsJobMemoryIsRefusedNamingIt) {
  constexpr int64_t m = 6, n = 8, k = 16;  // 1088 bytes held in f32
  auto pes = start_session(1024);
  const std::vector<std::string> said = run_processes([&](Session& session, int) -> std::string {
    std::vector<float> a(m * k, 1.0f), b(k * n, 1.0f), c(m * n);
    // Both PEs are served before the refusal ends the session (it comes before any exchange).
    session.barrier();
    try {
      session.gemm_all_reduce(a.data(), b.data(), c.data(), m, n, k, wire::DATA_TYPE_F32);
      return "accepted";
    } catch (const std::exception& e) {
      return e.what();
    }
  });
  expect_named_or_aborted(said, "allowed up to 1024 bytes of operands (this daemon's --job-memory");
  expect_named_or_aborted(endings(pes), "too large for a session call");
  node_.reset_between_jobs();
  serves_the_next_session();
}

// The dispatch handles a process holds keep their routing and paths in the daemon: together
// bounded by the same share of --job-memory. Released handles give their bytes back; holding
// them past it refuses the next dispatch naming the flag.
TEST_F(AttachedOps, DispatchHandlesHeldPastTheDaemonsJobMemoryAreRefusedNamingIt) {
  auto pes = start_session(2048);
  const MoeInputs in_0 = moe_inputs(0), in_1 = moe_inputs(1);
  const std::vector<std::string> said = run_processes([&](Session& session, int pe) -> std::string {
    const MoeInputs& in = pe == 0 ? in_0 : in_1;
    std::vector<float> recv_x, recv_weights;
    std::vector<int64_t> recv_idx;
    auto dispatch = [&] {
      return session.dispatch(
          in.x.data(), in.idx.data(), in.weights.data(), kTokens, kHidden, kTopk, kExperts,
          wire::DATA_TYPE_F32, [&](int64_t received) {
            recv_x.resize(received * kHidden);
            recv_idx.resize(received * kTopk);
            recv_weights.resize(received * kTopk);
            return DispatchOutputs{recv_x.data(), recv_idx.data(), recv_weights.data()};
          });
    };
    for (int i = 0; i < 40; ++i) dispatch();  // each released at once: far past 2048 bytes in all
    std::vector<std::shared_ptr<DispatchHandle>> held;
    try {
      for (int i = 0; i < 100; ++i) held.push_back(dispatch());
      return "100 handles held";
    } catch (const std::exception& e) {
      if (held.empty()) return "refused with nothing held: " + std::string(e.what());
      return e.what();
    }
  });
  expect_named_or_aborted(said, "bytes for a session's handles (this daemon's --job-memory");
  expect_named_or_aborted(endings(pes), "release handles you are done with");
  node_.reset_between_jobs();
  serves_the_next_session();
}

TEST_F(AttachedOps, TheFusedOpsMatchAPlainMatmul) {
  constexpr int64_t m = 6, n = 8, k = 16;
  auto pes = start_session();
  auto a_of = [](int pe, int64_t i, int64_t j) { return float((i + 2 * j + pe) % 5) - 2; };
  auto b_of = [](int pe, int64_t i, int64_t j) { return float((3 * i + j + pe) % 7) / 4; };
  const std::vector<std::string> said =
      run_processes([&](Session& session, int local) -> std::string {
        std::vector<float> a(m * k), b(k * n), c(m * n), gathered(2 * m * k), gathered_c(2 * m * n);
        for (int64_t i = 0; i < m * k; ++i) a[i] = a_of(local, i / k, i % k);
        for (int64_t i = 0; i < k * n; ++i) b[i] = b_of(local, i / n, i % n);
        auto product = [&](int pe, int64_t i, int64_t j, bool same_b) {  // (a_pe x b)[i][j]
          float sum = 0;
          for (int64_t q = 0; q < k; ++q) sum += a_of(pe, i, q) * b_of(same_b ? local : pe, q, j);
          return sum;
        };
        session.gemm_all_reduce(a.data(), b.data(), c.data(), m, n, k, wire::DATA_TYPE_F32);
        for (int64_t i = 0; i < m * n; ++i) {
          const float want = product(0, i / n, i % n, false) + product(1, i / n, i % n, false);
          if (std::fabs(c[i] - want) > 1e-4f) return "gemm_all_reduce element " + std::to_string(i);
        }
        std::vector<float> part(m / 2 * n);
        const int64_t rows = session.matmul_reduce_scatter(a.data(), b.data(), part.data(), m, n, k,
                                                           wire::DATA_TYPE_F32);
        if (rows != m / 2) return "matmul_reduce_scatter gave " + std::to_string(rows) + " rows";
        for (int64_t i = 0; i < rows * n; ++i) {
          const int64_t row = local * rows + i / n;
          const float want = product(0, row, i % n, false) + product(1, row, i % n, false);
          if (std::fabs(part[i] - want) > 1e-4f)
            return "matmul_reduce_scatter element " + std::to_string(i);
        }
        session.all_gather_matmul(a.data(), b.data(), gathered_c.data(), gathered.data(), m, n, k,
                                  wire::DATA_TYPE_F32);
        for (int64_t i = 0; i < 2 * m * k; ++i) {
          if (gathered[i] != a_of(int(i / (m * k)), i % (m * k) / k, i % k)) {
            return "all_gather_matmul's gathered A element " + std::to_string(i);
          }
        }
        for (int64_t i = 0; i < 2 * m * n; ++i) {
          const float want = product(int(i / (m * n)), i % (m * n) / n, i % n, true);
          if (std::fabs(gathered_c[i] - want) > 1e-4f)
            return "all_gather_matmul element " + std::to_string(i);
        }
        return "ok";
      });
  EXPECT_EQ(said, std::vector<std::string>(2, "ok"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

TEST_F(AttachedOps, AutoModePlansOnceAndEveryCallGivesTheSameBitsAndABadModeIsNamed) {
  constexpr int64_t m = 40, n = 24, k = 32;
  auto pes = start_session();
  const std::vector<std::string> said =
      run_processes([&](Session& session, int local) -> std::string {
        std::vector<float> a(m * k), b(k * n);
        for (int64_t i = 0; i < m * k; ++i) a[i] = float((i * 7 + local) % 11) / 8 - 0.5f;
        for (int64_t i = 0; i < k * n; ++i) b[i] = float((i * 5 + local) % 13) / 8 - 0.7f;
        std::vector<float> sequential(m * n), first(m * n), again(m * n);
        session.gemm_all_reduce(a.data(), b.data(), sequential.data(), m, n, k, wire::DATA_TYPE_F32,
                                wire::MATMUL_MODE_SEQUENTIAL);
        session.gemm_all_reduce(a.data(), b.data(), first.data(), m, n, k, wire::DATA_TYPE_F32,
                                wire::MATMUL_MODE_AUTO);  // plans: both modes run
        for (int call = 0; call < 2; ++call) {
          session.gemm_all_reduce(a.data(), b.data(), again.data(), m, n, k, wire::DATA_TYPE_F32,
                                  wire::MATMUL_MODE_AUTO);
          if (again != first) return "auto call " + std::to_string(call) + " changed the result";
        }
        for (int64_t i = 0; i < m * n; ++i) {
          if (std::fabs(first[i] - sequential[i]) > 1e-4f) {
            return "auto element " + std::to_string(i) + " is not the sum";
          }
        }
        try {
          session.gemm_all_reduce(a.data(), b.data(), again.data(), m, n, k, wire::DATA_TYPE_F32,
                                  wire::MATMUL_MODE_BOTH);
          return std::string("mode both was accepted");
        } catch (const InvalidArgument& e) {
          session.barrier();  // the session still serves
          return e.what();
        }
      });
  EXPECT_EQ(said, std::vector<std::string>(
                      2, "mode both is not a fused call's mode: allowed fused, sequential, auto"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

// A PE with no tokens that receives no rows passes empty vectors, whose data() is null: its
// dispatch and combine go through (nothing to copy or lend) while its peer's carry the tokens.
TEST_F(AttachedOps, APeWithNoTokensAndNoRowsMayPassEmptyVectors) {
  auto pes = start_session();
  const auto combined = run_processes([](Session& session, int pe) {
    const int64_t tokens = pe == 0 ? 2 : 0;
    std::vector<float> x(tokens * kHidden, 1.0f), weights(tokens * kTopk, 1.0f), recv_x, recv_w;
    std::vector<int64_t> idx(tokens * kTopk), recv_idx;
    for (int64_t i = 0; i < tokens * kTopk; ++i) idx[i] = i % 2;  // experts 0 and 1: PE 0's
    const auto handle =
        session.dispatch(x.data(), idx.data(), weights.data(), tokens, kHidden, kTopk, kExperts,
                         wire::DATA_TYPE_F32, [&](int64_t received) {
                           recv_x.resize(received * kHidden);
                           recv_idx.resize(received * kTopk);
                           recv_w.resize(received * kTopk);
                           return DispatchOutputs{recv_x.data(), recv_idx.data(), recv_w.data()};
                         });
    std::vector<float> out(tokens * kHidden);
    session.combine(*handle, recv_x.data(), kHidden, wire::DATA_TYPE_F32, nullptr, out.data());
    return out;
  });
  EXPECT_EQ(combined[0], std::vector<float>(2 * kHidden, 1.0f)) << "each token once, from PE 0";
  EXPECT_TRUE(combined[1].empty());
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

// A call whose blocks would pass the staging area's most is refused by the library before
// anything is sent (x is not even read), and the session goes on.
TEST_F(AttachedOps, ACallPastTheStagingAreasMostIsRefusedBeforeAnythingIsSent) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& session, int) -> std::string {
    constexpr int64_t kMany = int64_t{1} << 18, kWidest = kMaxMoeHidden;  // 64 GiB of f32 x
    const std::vector<int64_t> idx(kMany, -1);
    const std::vector<float> weights(kMany, 1.0f), x(1);
    std::string error;
    try {
      session.dispatch(x.data(), idx.data(), weights.data(), kMany, kWidest, 1, kExperts,
                       wire::DATA_TYPE_F32, [&](int64_t) { return DispatchOutputs{}; });
    } catch (const InvalidArgument& e) {
      error = e.what();
    }
    session.barrier();  // the session still serves
    return error;
  });
  for (const std::string& error : said) {
    EXPECT_NE(error.find("bytes of staging for its inputs"), std::string::npos) << error;
    EXPECT_NE(error.find("allowed up to " + std::to_string(attach::kMaxStagingBytes)),
              std::string::npos)
        << error;
  }
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

TEST_F(AttachedOps, AnExpertOutOfRangeIsRefusedNamingTheTokenAndTheSessionGoesOn) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& session, int) -> std::string {
    std::vector<float> x(2 * kHidden), weights(2 * kTopk, 1.0f), out(kHidden * 2);
    std::vector<int64_t> idx = {0, 1, 2, kExperts};
    std::string error;
    try {
      session.dispatch(x.data(), idx.data(), weights.data(), 2, kHidden, kTopk, kExperts,
                       wire::DATA_TYPE_F32, [&](int64_t) { return DispatchOutputs{}; });
    } catch (const InvalidArgument& e) {
      error = e.what();
    }
    session.barrier();  // the session still serves
    return error;
  });
  EXPECT_EQ(said,
            std::vector<std::string>(
                2, "dispatch's topk_idx: token 1 names expert 4: allowed -1 (none) or 0 to 3"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

TEST_F(AttachedOps, ActiveNodesThatLeaveThisNodeOutAreRefusedBeforeAnythingIsSent) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([](Session& session, int) -> std::string {
    std::vector<float> x(2 * kHidden), weights(2 * kTopk, 1.0f);
    std::vector<int64_t> idx = {0, 1, 2, 3};
    std::string error;
    try {
      session.dispatch(
          x.data(), idx.data(), weights.data(), 2, kHidden, kTopk, kExperts, wire::DATA_TYPE_F32,
          [&](int64_t) { return DispatchOutputs{}; }, {}, nullptr, /*active_nodes=*/0b10);
    } catch (const InvalidArgument& e) {
      error = e.what();
    }
    session.barrier();  // the session still serves
    return error;
  });
  EXPECT_EQ(said, std::vector<std::string>(
                      2,
                      "dispatch: the active nodes (mask 2) must be some of the cluster's 1 (at "
                      "most 64), this process's node 0 among them: the processes of a node "
                      "left out do not call"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

// Thread u of PE p, round r, token t: every element tells all four.
float threaded_value(int pe, int thread, int round, int64_t t, int64_t h) {
  return float(pe * 10000 + thread * 1000 + round * 10 + t) + float(h) / 16;
}

// "" when `rows` (count x kHidden) are tokens 0..count-1 of one round of one thread of `pe`
// (thread u sends 2 + u tokens), and, when `round` >= 0, of thread `thread` in that round.
std::string one_calls_tokens(const float* rows, int64_t count, int pe, int thread, int round) {
  if (count != 2 && count != 3) return "a block of " + std::to_string(count) + " tokens";
  const int u = int(count) - 2;
  if (round >= 0 && u != thread) return "another thread's block";
  const int r = round >= 0 ? round : int(rows[0] - float(pe * 10000 + u * 1000)) / 10;
  for (int64_t t = 0; t < count; ++t) {
    for (int64_t h = 0; h < kHidden; ++h) {
      if (rows[t * kHidden + h] != threaded_value(pe, u, r, t, h)) {
        return "token " + std::to_string(t) + " is not PE " + std::to_string(pe) + "'s thread " +
               std::to_string(u) + " round " + std::to_string(r);
      }
    }
  }
  return "";
}

// Two threads of each process dispatch at once, with different token counts: a staged call
// holds the staging area from staging to copying out, so neither sees the other's tokens.
// (Their dispatches pair up across the PEs in whatever order they run: the shapes match.)
TEST_F(AttachedOps, TwoThreadsStagedCallsDoNotMixTheirTokens) {
  constexpr int kRounds = 40;
  auto pes = start_session();
  const auto said = run_processes([](Session& session, int pe) -> std::string {
    auto thread = [&](int u) -> std::string {
      const int64_t tokens = 2 + u;
      std::vector<float> x(tokens * kHidden), weights(tokens * kTopk, 1.0f), got;
      std::vector<int64_t> idx(tokens * kTopk), got_idx;
      std::vector<float> got_weights;
      for (int64_t t = 0; t < tokens; ++t) idx[t * kTopk] = 0, idx[t * kTopk + 1] = 2;
      for (int round = 0; round < kRounds; ++round) {
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t h = 0; h < kHidden; ++h)
            x[t * kHidden + h] = threaded_value(pe, u, round, t, h);
        }
        session.dispatch(x.data(), idx.data(), weights.data(), tokens, kHidden, kTopk, kExperts,
                         wire::DATA_TYPE_F32, [&](int64_t received) {
                           got.assign(received * kHidden, 0.0f);
                           got_idx.resize(received * kTopk);
                           got_weights.resize(received * kTopk);
                           return DispatchOutputs{got.data(), got_idx.data(), got_weights.data()};
                         });
        // Rows by source PE: PE 0's block first. Each PE sent every token to both PEs.
        const int64_t received = int64_t(got.size()) / kHidden, other = received - tokens;
        const float* own = got.data() + (pe == 0 ? 0 : other * kHidden);
        const float* theirs = got.data() + (pe == 0 ? tokens * kHidden : 0);
        std::string wrong = one_calls_tokens(own, tokens, pe, u, round);
        if (wrong.empty()) wrong = one_calls_tokens(theirs, other, 1 - pe, -1, -1);
        if (!wrong.empty()) return "round " + std::to_string(round) + ": " + wrong;
      }
      return "";
    };
    auto second = std::async(std::launch::async, thread, 1);
    const std::string first = thread(0);
    return first + second.get();
  });
  EXPECT_EQ(said, std::vector<std::string>(2, ""));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

TEST_F(AttachedOps, PesThatPassDifferentShapesAreAllRefusedNamingTheOddOne) {
  auto pes = start_session();
  const std::vector<std::string> said =
      run_processes([](Session& session, int local) -> std::string {
        auto* x = static_cast<float*>(session.malloc(200 * sizeof(float)));
        try {
          session.all_reduce(x, local == 0 ? 100 : 200, wire::DATA_TYPE_F32);
        } catch (const Error& e) {
          return e.what();
        }
        return "no error";
      });
  for (const std::string& error : said) {
    EXPECT_NE(error.find("the PEs' calls differ: PE 1 made another call"), std::string::npos)
        << error;
  }
  for (const std::string& ending : endings(pes)) {
    EXPECT_NE(ending.find("the PEs' calls differ"), std::string::npos) << ending;
  }
}

}  // namespace
}  // namespace symmesh
