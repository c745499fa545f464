// One-shot all-reduce among a team's members: every member puts its whole vector into every
// other member's team scratch (one put_signal each) and reduces all n vectors itself, in member
// order. Cost: 1 step; each member sends (n-1)x the vector and reduces n of them. Against the
// ring's 2(n-1) steps it trades bytes for latency, so it pays for small vectors: every member
// computes the same sum in the same order, so the result is bitwise the same everywhere and
// from run to run.
//
// The vectors land in one of two halves of the team scratch, by the call's parity. A one-shot
// whose team's previous collective was a one-shot, with no ring (which may fill the whole
// scratch) since, needs no entry announcement: a member that finished call s-1 holds every
// other member's vector of s-1, which each sent only after it had read everything of call s-2
// and of any call before (the last use of the half that call s writes); and call s-1's half,
// which a slower member may still be reading, is not touched. This relies on a PE's signals
// to one node landing in order (a later signal seen means the earlier data is there), which
// every transport keeps, tcp across striping too. Otherwise (the first one-shot, or
// one after a ring) each member announces that it entered (the others may now write into its
// scratch) and the writers wait for it. The split in two lets the announcement travel while
// the caller prepares its vector: enter first, exchange later.
#pragma once

#include "runtime/collectives/dtype.h"
#include "runtime/pe.h"

namespace symmesh {

// True when a one-shot of `count` f32 values among `members` fits half the team scratch and is
// below the size where the ring's split of the bytes wins.
bool one_shot_suits(size_t count, int members);

// Takes the team's next collective number and, unless the team's last collective was a
// one-shot with no ring since, tells every other member this one entered it.
uint64_t one_shot_enter(Pe& pe, Team& team);

// `acc` holds this member's f32 contribution to `count` elements; writes the reduction over
// the team, rounded to `dtype`, to dst[0, count). `acc` may be dst itself when dtype is f32.
void one_shot_allreduce_f32(Pe& pe, Team& team, uint64_t sequence, void* dst, const float* acc,
                            size_t count, DType dtype, ReduceOp op);

}  // namespace symmesh
