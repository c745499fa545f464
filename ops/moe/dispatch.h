// MoE dispatch, hierarchical (DeepEP's internode dispatch, on the CPU): each PE sends each of
// its tokens once to every node holding one of the token's experts, to the PE with its own
// local rank there (the forwarder), which writes it straight into the receiving PEs' arrays on
// its node through shared memory.
//
// Steps, per call (every PE calls with its own tokens and routing):
//  1. Notify: each PE puts, per channel, how many tokens it sends to every PE (to that PE) and
//     to every node (to every PE with its local rank): exact receive regions, no guessing.
//  2. Send (one thread per channel): the channel's tokens, as records (x, expert ids, weights,
//     source), chunk by chunk into each other destination node's forwarder region with
//     put_signal; a send never waits, as every region is sized from the counts. The tokens for
//     this PE's own node it forwards itself (it is their forwarder): each record is written once,
//     straight into every receiving PE's array, with no staging and no forwarder copy.
//  3. Forward (the same threads): each record from another node, as its tail says it landed,
//     into every destination PE of this node at its place: received tokens are ordered by
//     source PE, then token.
//  4. Receive: once every record has landed, this PE's expert ids, weights and sources into the
//     result's arrays. The rows are already in place: a node's PEs are threads of one daemon,
//     and each lends its peers the room for its received rows (its result's, or where the caller
//     places them) for the call, so steps 2 and 3 write a token's x straight there and only the
//     rest of the record into the receiver's region.
// The result's paths (DeepEP's handle) keep what combine needs to walk them backwards: the
// receive prefix matrix (per source PE and channel), each token's record index in each node's
// forwarder order, and where each forwarded record went in each receiver's arrays. A
// forwarder's region holds only the records from other nodes; its own node's keep their place
// in the order.
//
// Cost per PE: for each token, one record per other destination node over the network (none
// more for more experts there) and one copy per destination PE on the destination node,
// straight into that PE's rows.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "ops/moe/layout.h"
#include "runtime/pe.h"

namespace symmesh {

// A received token, as dispatch returns it: from which PE and which of its tokens.
struct ReceivedToken {
  int source_pe;
  int64_t source_token;
};

struct DispatchPaths {
  int channels = 0;
  // Receiver: [source PE][channel + 1] prefix sums of the tokens received (DeepEP's
  // gbl_channel_prefix_matrix, with the leading zero).
  std::vector<int64_t> recv_prefix;
  // Source: [token][node] the token's record index in the forwarder order of that node's PE
  // with this PE's local rank, or -1 where it was not sent (DeepEP's send_rdma_head).
  std::vector<int64_t> rdma_slot;
  // Forwarder: [source node][channel + 1] prefix sums of the records it received from the PE
  // with its local rank on each node, and per record, for every PE of this node, the index it
  // was written at in that PE's received tokens, or -1 (DeepEP's send_nvl_head).
  std::vector<int64_t> forward_prefix;
  std::vector<int64_t> nvl_slot;  // [record][local rank]
};

struct DispatchResult {
  int64_t received = 0;
  std::vector<std::byte> x;            // [received][hidden] in options.x_dtype
  std::vector<int32_t> topk_idx;       // [received][topk]: expert id if held here, else -1
  std::vector<float> topk_weights;     // [received][topk]
  std::vector<ReceivedToken> sources;  // [received]
  DispatchPaths paths;                 // what the combine walks back (DeepEP's handle)
};

// Where a dispatch puts the rows it receives when its caller says: called once, on the calling
// thread, with their count (maybe 0: then the pointer is not used), once the counts are known
// and before any row is written; returns room for received x hidden elements of the dispatch's
// type, which must not overlap the tokens, must stay valid until dispatch returns or throws, and
// must not wait for other PEs.
using PlaceDispatchRows = std::function<std::byte*(int64_t received)>;

// Collective over the PEs of the nodes taking part (options.active_nodes: all by default; a
// token routed to a node left out is an InvalidArgument); each passes its own tokens,
// x: [tokens][hidden] in options.x_dtype (the routing says how many: PEs may hold different
// numbers, or none; options.tokens is not used). With `place_x`, the received rows go where it says
// and the result's x stays empty. `reuse`, an earlier call's result, lends its arrays' storage, so
// a caller dispatching again and again does not reallocate (nor the kernel fault in) the result's
// rows; the call's symmetric regions and small bookkeeping are still made per call. Throws
// InvalidArgument for bad options or inputs of the wrong size, HeapExhausted (naming the region)
// when the regions do not fit, PeerError when a peer's records disagree with its counts, the wait's
// error when a peer does not come by the deadline, and whatever place_x threw (once the PE has done
// its part of the collective).
DispatchResult dispatch(Pe& pe, const MoeOptions& options, const void* x, const Routing& routing,
                        DispatchResult reuse = {}, const PlaceDispatchRows& place_x = {});
// The same with bf16 tokens, their count checked against the routing's.
DispatchResult dispatch(Pe& pe, const MoeOptions& options, const std::vector<uint16_t>& x,
                        const Routing& routing, DispatchResult reuse = {});

}  // namespace symmesh
