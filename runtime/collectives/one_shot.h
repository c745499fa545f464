// One-shot all-reduce among a team's members: every member puts its whole vector into every
// other member's team scratch (one put_signal each) and reduces all n vectors itself, in member
// order. Cost: 1 step; each member sends (n-1)x the vector and reduces n of them. Against the
// ring's 2(n-1) steps it trades bytes for latency, so it pays for small vectors: every member
// computes the same sum in the same order, so the result is bitwise the same everywhere and
// from run to run.
//
// Split in two so the entry announcement (the others may now write into this member's
// scratch) travels while the caller prepares its vector: enter first, exchange later.
#pragma once

#include "runtime/collectives/dtype.h"
#include "runtime/pe.h"

namespace symmesh {

// True when a one-shot of `count` f32 values among `members` fits the team scratch and is
// below the size where the ring's split of the bytes wins.
bool one_shot_suits(size_t count, int members);

// Takes the team's next collective number and tells every other member this one entered it.
uint64_t one_shot_enter(Pe& pe, Team& team);

// `acc` holds this member's f32 contribution to `count` elements; writes the reduction over
// the team, rounded to `dtype`, to dst[0, count). `acc` may be dst itself when dtype is f32.
void one_shot_allreduce_f32(Pe& pe, Team& team, uint64_t sequence, void* dst, const float* acc,
                            size_t count, DType dtype, ReduceOp op);

}  // namespace symmesh
