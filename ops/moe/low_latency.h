// MoE dispatch and combine for decoding (DeepEP's low-latency mode, on the CPU): few tokens per
// PE, where the normal mode's notify round, rings and per-call allocation cost more than the
// data.
//
// A LowLatencyBuffer is allocated once per shape (at most `max_tokens` tokens per PE) and
// reused by every call. It has two halves, used by alternate dispatches, so two micro-batches
// can be in flight: dispatch A, dispatch B, combine A, combine B. A third dispatch before A is
// combined is refused.
//
// Dispatch (every PE calls with its own tokens and routing):
//  - Each PE makes, per destination node, one record per token with an expert there: the token,
//    its source index, and its experts on that node with their gate weights. It sends them with
//    one put_signal into its own block of the landing PE's region: the PE with its local rank on
//    that node, each record's header and its token's row gathered where they lie (no copy into a
//    send buffer first); for its own node it packs straight into its own region. There is no notify
//    step: the signal carries the record count and the call's sequence number, so a region is
//    never cleared and a stale signal is never mistaken for a new one.
//  - Every PE of the node reads the records in place, in the landing PE's memory, waits on the
//    landing PE's signal, and copies each token once per expert of its own into one array,
//    expert by expert (DeepEP's packed_recv_x, without its padding): sources in PE order,
//    tokens in order.
// Combine walks the same records backwards:
//  - The landing PE computes, per record, the weighted sum of each of its node's PEs' expert
//    rows for it (gate weights from the record, in topk order, in f32), adds them in local-rank
//    order, rounds once, and sends the records' rows back to their source with one put_signal.
//    It reads its node peers' rows where their experts wrote them: they lend it, for the call,
//    their rows and the terms their dispatch recorded, between two barriers of the node (a
//    node's PEs are threads of one daemon). No f32 partial is written or read back.
//  - The source adds, per token, the rows of every node in node order, in f32, and rounds once.
//    Every sum has a fixed order: bitwise deterministic.
// DeepEP sends one record per (token, expert), since a GPU's links have bandwidth to spare and
// its latency is in kernel launches; here every byte on the wire costs CPU time on both ends, so
// a token crosses the network once per node, as in the hierarchical mode, and the PEs of a node
// share it in memory instead of forwarding it.
//
// Cost per call and PE: one put_signal per node each way, one record per (token, node) on the
// wire, one copy of a token per (token, local expert) into x at the receiver, and one read of
// every expert row of the records it lands at combine.
//
// A half is reused by the dispatch two calls later, and a PE cannot start that dispatch before
// it has combined the handle that used the half. That combine returns only once every landing
// PE of its tokens has sent its rows, which each landing PE does after its node's PEs entered
// the combine (its opening node barrier), so after they finished reading the records in place
// at dispatch; and the landing PE itself has read its block by then. So no PE writes into a
// half (records or rows) a peer still reads.
#pragma once

#include <cstdint>
#include <vector>

#include "api/op_limits.h"
#include "ops/moe/received_rows.h"
#include "ops/moe/routing.h"
#include "runtime/collectives/dtype.h"
#include "runtime/local_loans.h"
#include "runtime/pe.h"

namespace symmesh {

// What a dispatched record carries besides its token: the source token, then per topk slot the
// expert (-1 when not on the record's node) and its gate weight, padded to 16 bytes.
inline size_t low_latency_header_bytes(int topk) {
  return (8 + 8 * size_t(topk) + 15) / 16 * 16;
}
// Where a record's header keeps topk slot k's expert (int32) and gate weight (f32).
inline size_t low_latency_expert_at(int k) {
  return 8 + 4 * size_t(k);
}
inline size_t low_latency_weight_at(int topk, int k) {
  return 8 + 4 * size_t(topk) + 4 * size_t(k);
}

struct LowLatencyShape {
  int64_t max_tokens = 0;  // per PE and call
  int64_t hidden = 0;
  int topk = 0;
  int experts = 0;  // spread evenly: PE p holds experts [p * E/n, (p + 1) * E/n)
  DType dtype = DType::kBF16;

  bool operator==(const LowLatencyShape&) const = default;
};
// Throws InvalidArgument naming the field of `shape` out of range for `n_pes` PEs.
void check_low_latency_shape(const LowLatencyShape& shape, int n_pes);

// What one dispatch delivered to this PE, per local expert, and what combine needs.
struct LowLatencyDispatch {
  int half = 0;
  uint64_t sequence = 0;
  // [local expert + 1]: expert e's tokens are rows [offset[e], offset[e + 1]) of x.
  std::vector<int64_t> offset;
  // [received][hidden] in the shape's dtype. Its storage is the buffer's: combine takes it back
  // (x is empty after it) for the next dispatch on this half, so a call allocates no rows.
  std::vector<std::byte> x;
  // [received]: each token's source PE and index there.
  std::vector<int32_t> source_pe;
  std::vector<int64_t> source_token;
  // What combine needs. As an expert PE: per source, each (record, row of x, gate weight) of
  // this PE's experts, in record then topk order, and the count of records each source landed
  // on this node. As a source: [token][node] the record's index in that node's landing block,
  // or -1, and the records sent to each node.
  struct Term {
    int64_t record;
    int64_t row;
    float weight;
  };
  std::vector<std::vector<Term>> terms;
  std::vector<int64_t> sent_record;
  std::vector<uint64_t> sent;    // [node]: the records this PE sent it
  std::vector<uint64_t> landed;  // [source]: the records it signalled, as checked at dispatch

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
  // With `place_x`, the received rows go where it says instead of into the handle's x (which
  // stays empty).
  LowLatencyDispatch dispatch(const void* x, const Routing& routing,
                              const PlaceReceivedX& place_x = {});
  // Collective, once per dispatch. expert_out: [received][hidden] in the shape's dtype, the
  // output row of each received token, in the dispatch's x order (it may be the handle's x).
  // Writes out [tokens][hidden] in the shape's dtype: per token the sum over its experts of the
  // gate weight (the dispatch routing's) times the expert's row: per PE in topk order, per node
  // in local-rank order, then in node order.
  void combine(LowLatencyDispatch& handle, const void* expert_out, void* out);
  // Frees the half of a dispatch that will not be combined (a caller that dropped its handle).
  // Every PE does the same: a PE whose peers combine it instead leaves them to their deadline.
  void release(LowLatencyDispatch& handle);
  // The handle is this buffer's, dispatched and not yet combined or released.
  bool live(const LowLatencyDispatch& handle) const;

 private:
  size_t row_bytes() const;
  size_t record_bytes() const { return header_bytes_ + row_bytes(); }
  int landing_pe(int node, int source) const { return node * ranks_ + pe_.local_rank_of(source); }
  // This PE's symmetric addresses; as another PE of this node sees them through pe_.ptr.
  std::byte* dispatch_block(int half, int source_node) const;
  std::byte* combine_block(int half, int node) const;
  uint64_t* dispatch_signal(int half, int source_node) const;
  uint64_t* combine_signal(int half, int node) const;
  // The record count a landing signal carries; PeerError when more than a block holds.
  uint64_t landed(const uint64_t* word, int source) const;
  void wait_for(const uint64_t* word, uint64_t sequence, int peer, const char* what);
  // Writes the header of each record `routing` sends `node` (one per token with an expert
  // there), the i-th at headers + i * stride, notes the records in `d` and their tokens in
  // packed_tokens_; returns the count. The rows are taken by packed_tokens_, never by a
  // header read back: this node's headers lie in the segment, where an attached process can
  // change them before the rows are copied.
  size_t pack_headers(const Routing& routing, int node, std::byte* headers, size_t stride,
                      LowLatencyDispatch& d);
  // What a PE lends its node's landing PEs for one combine: its expert rows, and its handle's
  // terms saying which rows belong to which records.
  struct LentExperts {
    const std::byte* rows;
    int64_t received;  // rows
    const std::vector<std::vector<LowLatencyDispatch::Term>>* terms;
    uint64_t buffer;    // which buffer: its records' symmetric offset
    uint64_t sequence;  // of the dispatch being combined
  };
  void reduce_node(const LowLatencyDispatch& handle, const std::vector<LocalLoans::Borrowed>& lent,
                   int source, uint64_t count, std::byte* out) const;

  friend struct LowLatencyBufferProbe;   // tests: a peer that writes what it likes
  static constexpr int kCountBits = 24;  // a signal: the call's sequence number, then the count
  static constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;

  Pe& pe_;
  const LowLatencyShape shape_;
  const int n_, ranks_, nodes_;
  const size_t header_bytes_;
  std::byte* dispatch_region_ = nullptr;  // [half][source node][max_tokens] records
  std::byte* combine_region_ = nullptr;   // [half][node][max_tokens] rows
  uint64_t* signals_ = nullptr;           // dispatch [half][node], combine [half][node]
  std::vector<std::byte> staging_;        // one node's record headers, or one source's rows
  std::vector<PutPiece> pieces_;          // a put of records: each header, then its token's row
  std::vector<int64_t> packed_tokens_;    // the token of each record pack_headers wrote
  std::vector<std::byte> spare_x_[2];     // each half's x storage while no dispatch holds it
  uint64_t sequence_ = 0;                 // dispatches made
  bool live_[2] = {false, false};         // a half's dispatch not yet combined
};

}  // namespace symmesh
