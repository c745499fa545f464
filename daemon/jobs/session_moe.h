// A session's MoE calls: DeepEP's dispatch and combine on the attached process's tensors, which
// pass through the PE's staging area (api/staging_layout.h says where each one sits) or lie on
// its heap (api/request_ring.h's Place), and the dispatches whose handles the process still
// holds, for their combines. The low-latency calls (the decoding mode) go through one
// LowLatencyBuffer per session, kept between calls as a decoding model keeps DeepEP's buffer. It
// is freed at detach without a barrier (detaching is not collective): a node peer may still read
// this PE's dispatch records for a moment, which is safe because nothing allocates on this PE's
// heap again before the node's next job resets it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "api/request_ring.h"
#include "api/staging_area.h"
#include "ops/moe/combine.h"
#include "ops/moe/low_latency.h"

namespace symmesh {

// Dispatches a process may hold on to at once (each keeps its routing and paths).
inline constexpr size_t kMaxDispatchHandles = 256;

class SessionMoe {
 public:
  // `memory_bytes`: the most the dispatch handles a process holds may make the daemon keep (this
  // PE's share of --job-memory; 0: the staging area's cap).
  SessionMoe(Pe& pe, uint64_t memory_bytes);

  struct Dispatched {
    uint64_t handle;
    uint64_t received;
  };
  // Collective. Reads x, topk_idx and topk_weights from the staging area (x perhaps from the
  // heap), writes recv_x (perhaps onto the heap), recv_topk_idx (local expert index, or -1)
  // and recv_topk_weights there.
  Dispatched dispatch(const attach::Request& request, attach::StagingArea& staging);
  // Collective. Reads the rows (and the bias) of the dispatch named in args[0], args[2] wide,
  // and writes the combined tokens: the rows walk back the paths the tokens came, whatever
  // their width and type (a backward pass combines gradients of other widths).
  void combine(const attach::Request& request, attach::StagingArea& staging);
  // Collective. A low-latency dispatch: reads x, topk_idx and topk_weights as dispatch does,
  // writes recv_x packed by local expert and the count of each. The buffer is made at the first
  // call and made again when the shape (hidden, topk, experts, max_tokens, type) changes.
  Dispatched low_latency_dispatch(const attach::Request& request, attach::StagingArea& staging);
  // Collective. Reads the expert rows of the low-latency dispatch args[0] and writes its tokens:
  // each the sum of its experts' rows weighted by the dispatch's topk_weights.
  void low_latency_combine(const attach::Request& request, attach::StagingArea& staging);
  // A dispatch's handle of either mode; a low-latency one not yet combined frees its half.
  void release(uint64_t handle);
  // Makes `agreed`, the part of a MoE call every PE taking part passes alike, the same on each
  // of them, and returns the nodes taking part (a bit per node; 0: all). Each PE numbers its
  // handles itself, so they differ once some PEs dispatched without the others: a combine's
  // handle becomes its dispatch's number among those made on the same nodes.
  uint64_t agree_on(attach::Request& agreed) const;

 private:
  struct Kept {
    MoeOptions options;
    Routing routing;
    DispatchResult result;  // without its tokens (the process has them)
    uint64_t bytes = 0;     // what it holds of the daemon's memory
    uint64_t number = 0;    // among the dispatches on its nodes (agree_on)
  };
  const Kept& kept(uint64_t handle) const;
  // A call's large tensor (`what`), `bytes` at `place`: in the staging area at `staged`, or on
  // this PE's heap at `offset` (the request's `field`), checked against it and aligned to
  // `element`. The heap is the process's own slice: what it names there it could write itself.
  std::byte* placed(attach::Place place, uint64_t offset, const char* field,
                    attach::StagingArea& staging, uint64_t staged, uint64_t bytes, size_t element,
                    const char* what);
  // The call's large input (a dispatch's x, a combine's rows): input_place at src.
  const std::byte* input_at(const attach::Request& r, attach::StagingArea& staging, uint64_t staged,
                            uint64_t bytes, size_t element, const char* what);
  // A dispatch's room for recv_x on the heap (output_place at dst, dst_bytes long), checked,
  // and apart from its `x_bytes` of x there; null when recv_x goes to the staging area. Rows
  // that do not fit go there too.
  std::byte* room_at(const attach::Request& r, attach::StagingArea& staging, uint64_t x_bytes,
                     size_t element);
  // A combine's output (output_place at dst, or the staging area grown to hold it at `staged`;
  // `bytes`), apart from its `rows_bytes` of rows.
  std::byte* output_at(const attach::Request& r, attach::StagingArea& staging, uint64_t staged,
                       uint64_t bytes, uint64_t rows_bytes, size_t element);
  // Refuses a dispatch of `tokens` x `topk` when the handles held, or the routing it keeps,
  // would pass the handles' memory (the rest of what it keeps is counted once it is made).
  void check_handle_room(int64_t tokens, int topk) const;
  // The session's low-latency buffer for `shape`, made again (collectively) when it differs.
  LowLatencyBuffer& low_latency_buffer(const LowLatencyShape& shape);

  Pe& pe_;
  const uint64_t most_held_;  // bytes the handles may hold
  uint64_t held_ = 0;
  std::map<uint64_t, Kept> handles_;
  std::unique_ptr<LowLatencyBuffer> low_latency_;
  uint64_t low_latency_buffers_ = 0;  // made so far: the current one's number
  // A low-latency dispatch the process still holds and the number of the buffer it went
  // through: a handle kept across a new shape is only forgotten when released.
  struct LowLatencyKept {
    LowLatencyDispatch dispatch;
    uint64_t buffer;
    uint64_t bytes;
    uint64_t number;  // among the dispatches on every node
  };
  std::map<uint64_t, LowLatencyKept> low_latency_handles_;
  uint64_t next_handle_ = 1;
  // The nodes a mask names, 0 when it names every node; and per such mask, the dispatches
  // (of either mode) made on them.
  uint64_t normalized(uint64_t active_nodes) const;
  std::map<uint64_t, uint64_t> dispatches_on_;
};

}  // namespace symmesh
