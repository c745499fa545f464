#include "jobs/moe/low_latency_job.h"

#include <cmath>
#include <cstring>

#include "jobs/moe/reference.h"
#include "ops/roles/roles.h"
#include "runtime/barrier.h"

namespace symmesh {
namespace {

LowLatencyShape buffer_shape(const MoeOptions& o) {
  return {.max_tokens = std::max<int64_t>(o.tokens, 1),
          .hidden = o.hidden,
          .topk = o.topk,
          .experts = o.experts,
          .dtype = o.x_dtype};
}

// The stand-in experts on the received tokens: row r of local expert e scaled by expert e's
// factor, rounded to bf16, as an expert's output would come back.
void run_experts(const LowLatencyDispatch& d, int first_expert, int64_t hidden,
                 std::vector<uint16_t>& out) {
  out.resize(d.x.size() / 2);
  const auto* x = reinterpret_cast<const uint16_t*>(d.x.data());
  for (int local = 0; local + 1 < int(d.offset.size()); ++local) {
    const float scale = expert_scale(first_expert + local);
    for (int64_t i = d.offset[local] * hidden; i < d.offset[local + 1] * hidden; ++i) {
      out[i] = f32_to_bf16(scale * bf16_to_f32(x[i]));
    }
  }
}

// The call, after a barrier, timed and counted as `op` in the per-call wait histogram.
double timed(Pe& pe, std::string_view op, auto&& call) {
  barrier_all(pe);
  const CountedCall counted(pe.peer_waits(), op);
  const double start = now_seconds();
  call();
  return now_seconds() - start;
}

}  // namespace

LowLatencyCalls::LowLatencyCalls(Pe& pe, const MoeOptions& options, const Routing& routing,
                                 const std::vector<uint16_t>& x)
    : pe_(pe), options_(options), routing_(routing), x_(x), buffer_(pe, buffer_shape(options)) {}

double LowLatencyCalls::dispatch(std::vector<std::byte>& output) {
  dispatched_ = {};  // the last handle goes before the next is made
  const double seconds = timed(pe_, "low-latency-dispatch",
                               [&] { dispatched_ = buffer_.dispatch(x_.data(), routing_); });
  // The PEs meet before the untimed work below (the stand-in experts, the combine that frees
  // the handle's half), so a PE done early takes no core from one still in its call; the peers'
  // benches wait in their next barrier. (After a timed combine, the job's exchange of times
  // is that meeting.)
  barrier_all(pe_);
  output = dispatched_.x;
  // The handle's half is free again only once combined.
  run_experts(dispatched_, pe_.my_pe() * buffer_.local_experts(), options_.hidden, expert_rows_);
  combined_.resize(size_t(routing_.tokens * options_.hidden) * 2);
  buffer_.combine(dispatched_, expert_rows_.data(), combined_.data());
  return seconds;
}

double LowLatencyCalls::combine(std::vector<std::byte>& output) {
  dispatched_ = {};
  dispatched_ = buffer_.dispatch(x_.data(), routing_);
  run_experts(dispatched_, pe_.my_pe() * buffer_.local_experts(), options_.hidden, expert_rows_);
  output.resize(size_t(routing_.tokens * options_.hidden) * 2);
  return timed(pe_, "low-latency-combine",
               [&] { buffer_.combine(dispatched_, expert_rows_.data(), output.data()); });
}

double low_latency_dispatch_error(const MoeOptions& o, const LowLatencyDispatch& got,
                                  const std::vector<std::byte>& got_x, int pe,
                                  const std::vector<Routing>& routings,
                                  const std::vector<std::vector<uint16_t>>& all_x) {
  const auto expected = reference_low_latency_dispatch(o, routings, pe);
  if (got.offset.size() != expected.size() + 1) return INFINITY;
  if (got_x.size() != size_t(got.received() * o.hidden) * 2) return INFINITY;
  const auto* x = reinterpret_cast<const uint16_t*>(got_x.data());
  for (size_t local = 0; local < expected.size(); ++local) {
    if (got.count(int(local)) != int64_t(expected[local].size())) return INFINITY;
    for (size_t i = 0; i < expected[local].size(); ++i) {
      const ReceivedToken& want = expected[local][i];
      const int64_t slot = got.offset[local] + int64_t(i);
      const uint16_t* sent = &all_x[want.source_pe][size_t(want.source_token) * o.hidden];
      if (got.source_pe[slot] != want.source_pe || got.source_token[slot] != want.source_token ||
          std::memcmp(sent, x + size_t(slot) * o.hidden, size_t(o.hidden) * 2) != 0) {
        return INFINITY;
      }
    }
  }
  return 0;
}

}  // namespace symmesh
