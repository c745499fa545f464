// Where a session call's staged tensors lie in its PE's staging area, as its request places them
// (api/request_ring.h: stage_at, stage_room, spill_at), checked before the call starts: a
// process names these offsets, and the daemon reads the inputs while it writes the outputs.
#pragma once

#include <cstdint>

#include "api/request_ring.h"

namespace symmesh {

class StagedBlocks {
 public:
  // The block of `in_end` bytes of inputs from r.stage_at; InvalidArgument naming the field
  // when stage_at or spill_at is not 64-byte aligned within the most an area holds, or spill_at
  // is not past the inputs.
  StagedBlocks(const attach::Request& r, uint64_t in_end);

  uint64_t inputs() const { return r_.stage_at; }
  // Where `out_end` bytes of outputs go: past the inputs either way.
  uint64_t outputs(uint64_t out_end) const;

 private:
  attach::Request r_;
  uint64_t in_end_;
};

}  // namespace symmesh
