// A session's MoE calls: DeepEP's dispatch and combine on the attached process's tensors, which
// pass through the PE's staging area (api/staging_layout.h says where each one sits), and the
// dispatches whose handles the process still holds, for their combines.
#pragma once

#include <cstdint>
#include <map>

#include "api/request_ring.h"
#include "api/staging_area.h"
#include "ops/moe/combine.h"

namespace symmesh {

// Dispatches a process may hold on to at once (each keeps its routing and paths).
inline constexpr size_t kMaxDispatchHandles = 256;

class SessionMoe {
 public:
  explicit SessionMoe(Pe& pe) : pe_(pe) {}

  struct Dispatched {
    uint64_t handle;
    uint64_t received;
  };
  // Collective. Reads x, topk_idx and topk_weights from the staging area, writes recv_x,
  // recv_topk_idx (local expert index, or -1) and recv_topk_weights there.
  Dispatched dispatch(const attach::Request& request, attach::StagingArea& staging);
  // Collective. Reads the rows (and the bias) of the dispatch named in args[0], args[2] wide,
  // and writes the combined tokens: the rows walk back the paths the tokens came, whatever
  // their width and type (a backward pass combines gradients of other widths).
  void combine(const attach::Request& request, attach::StagingArea& staging);
  void release(uint64_t handle);

 private:
  struct Kept {
    MoeOptions options;
    Routing routing;
    DispatchResult result;  // without its tokens (the process has them)
  };
  const Kept& kept(uint64_t handle) const;

  Pe& pe_;
  std::map<uint64_t, Kept> handles_;
  uint64_t next_handle_ = 1;
};

}  // namespace symmesh
