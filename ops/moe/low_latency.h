// MoE dispatch and combine for decoding (DeepEP's low-latency mode, on the CPU): few tokens per
// PE, where the normal mode's notify round and per-call allocation cost more than the data.
//
// A LowLatencyBuffer is allocated once per shape (at most `max_tokens` tokens per PE) and
// reused by every call. It has two halves, used by alternate dispatches, so two micro-batches
// can be in flight: dispatch A, dispatch B, combine A, combine B. A third dispatch before A is
// combined is refused.
//
// Dispatch (every PE calls with its own tokens and routing):
//  - Each PE packs, per destination PE, one record per (token, expert held there): the token,
//    its local expert and source token. It sends them with one put_signal per destination into
//    its own block of the destination's region for this half. There is no notify step: the
//    signal carries the record count and the call's sequence number, so a region is never
//    cleared and a stale signal is never mistaken for a new one.
//  - Each PE then waits for every source's signal and copies the records into one array, expert
//    by expert (DeepEP's packed_recv_x, without its padding to max_tokens x PEs per expert):
//    sources in PE order, tokens in order.
// Combine walks the same records backwards:
//  - Each PE gathers its experts' output rows into the order it received them from each
//    source, and sends them with one put_signal per source into its block of that source's
//    region for the handle's half.
//  - The source sums each token's rows in topk order, each scaled by its gate weight, in f32,
//    and rounds once. The result is bitwise deterministic.
//
// Cost per call and PE: n_pes put_signals each way, one record per (token, expert PE) on the
// wire, and one copy of a token into its arrays at each end.
//
// A half is reused by the dispatch two calls later. That dispatch waits for every PE's signal
// of the dispatch between, which each PE sends only after it finished the dispatch before that,
// and a PE cannot start it before combining the handle that used the half. So no PE writes into
// a half a peer still reads.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/moe/routing.h"
#include "runtime/collectives/dtype.h"
#include "runtime/pe.h"

namespace symmesh {

// The most tokens per PE a low-latency buffer takes (its records are counted in 24 bits).
inline constexpr int64_t kMaxLowLatencyTokens = 8192;

struct LowLatencyShape {
  int64_t max_tokens = 0;  // per PE and call
  int64_t hidden = 0;
  int topk = 0;
  int experts = 0;  // spread evenly: PE p holds experts [p * E/n, (p + 1) * E/n)
  DType dtype = DType::kBF16;
};

// What one dispatch delivered to this PE, per local expert, and what combine needs.
struct LowLatencyDispatch {
  int half = 0;
  uint64_t sequence = 0;
  // [local expert + 1]: expert e's tokens are rows [offset[e], offset[e + 1]) of x.
  std::vector<int64_t> offset;
  std::vector<std::byte> x;  // [received][hidden] in the shape's dtype
  // [received]: each token's source PE and index there.
  std::vector<int32_t> source_pe;
  std::vector<int64_t> source_token;
  // [source PE]: per record received from it, in order, its row in x.
  std::vector<std::vector<int64_t>> record_row;
  // This PE as a source: [token][k] the record index in its destination's block, or -1.
  std::vector<int64_t> sent_record;

  int64_t received() const { return offset.back(); }
  int64_t count(int local_expert) const { return offset[local_expert + 1] - offset[local_expert]; }
};

class LowLatencyBuffer {
 public:
  // Collective: allocates both halves on the symmetric heap (HeapExhausted names the region and
  // the shape to shrink). Throws InvalidArgument for a shape out of range.
  LowLatencyBuffer(Pe& pe, const LowLatencyShape& shape);
  // Frees the regions; every PE destroys its buffer after the same calls (a barrier first, so
  // no peer still writes into them).
  ~LowLatencyBuffer();
  LowLatencyBuffer(const LowLatencyBuffer&) = delete;
  LowLatencyBuffer& operator=(const LowLatencyBuffer&) = delete;

  const LowLatencyShape& shape() const { return shape_; }
  int local_experts() const { return shape_.experts / pe_.n_pes(); }

  // Collective. x: [routing.tokens][hidden] in the shape's dtype, at most max_tokens tokens.
  LowLatencyDispatch dispatch(const void* x, const Routing& routing);
  // Collective, once per dispatch. expert_out: [received][hidden] in the shape's dtype, the
  // output row of each received token, in the dispatch's x order. Returns [tokens][hidden]: per
  // token the sum over its experts, in topk order, of the gate weight times the expert's row.
  std::vector<std::byte> combine(LowLatencyDispatch& handle, const void* expert_out,
                                 const Routing& routing);

 private:
  size_t record_bytes() const;
  std::byte* dispatch_block(int half, int source) const;
  std::byte* combine_block(int half, int expert_pe) const;
  uint64_t* signal(uint64_t* base, int half, int peer) const { return base + half * n_ + peer; }
  void wait_for(uint64_t* word, uint64_t sequence, int peer, const char* what);

  Pe& pe_;
  const LowLatencyShape shape_;
  const int n_;
  const int64_t records_per_source_;  // max_tokens x min(topk, local experts)
  std::byte* dispatch_region_ = nullptr;
  std::byte* combine_region_ = nullptr;
  uint64_t* dispatch_signal_ = nullptr;  // [half][source]
  uint64_t* combine_signal_ = nullptr;   // [half][expert PE]
  std::vector<std::byte> staging_;       // one destination's records, or one source's rows
  uint64_t sequence_ = 0;                // dispatches made
  bool live_[2] = {false, false};        // a half's dispatch not yet combined
};

}  // namespace symmesh
