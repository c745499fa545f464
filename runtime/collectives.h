// Collectives on a team (NCCL/OpenSHMEM semantics): every member calls with the same
// arguments; `dst` and `src` are symmetric (Pe::malloc) and do not overlap, except that an
// all-reduce may run in place (dst == src); 16-bit types reduce in f32. Algorithms: `ring` (one
// ring over all members) and `hier` (reduce inside each node through shared memory, rings across
// nodes, gather inside the node again), chosen per call.
#pragma once

#include <vector>

#include "runtime/collectives/dtype.h"
#include "runtime/pe.h"

namespace symmesh {

// The reductions' and gathers' algorithms (all-to-all has one, direct puts, and takes none).
// The values are wire::CollectiveAlgo's, whose words they take (runtime/enum_words.h).
enum class CollAlgo { kRing = 2, kHier = 3 };
// What a collective runs when its caller (a job, a session call, a fused operator's sequential
// mode) does not choose: hier on every shape. With one PE a node it is the exchange across
// nodes alone, with one node the shared-memory part alone; across nodes an all-reduce takes
// the one-shot or the ring by size. Every call names its algorithm, so no caller gets another
// by leaving it out.
inline constexpr CollAlgo kDefaultCollAlgo = CollAlgo::kHier;

// dst[0, count) = reduction over the team of src[0, count); dst may be src.
void allreduce(Pe& pe, Team& team, void* dst, const void* src, size_t count, DType dtype,
               ReduceOp op, CollAlgo algo);

// Member i receives block i of the reduction: elements [i*count/n, (i+1)*count/n) of
// `count`, so blocks differ by at most one element when n does not divide count. An output
// that overlaps the input is refused (InvalidArgument) by every member.
void reduce_scatter(Pe& pe, Team& team, void* dst, const void* src, size_t count, DType dtype,
                    ReduceOp op, CollAlgo algo);

// dst[i*count, (i+1)*count) = member i's src[0, count).
void allgather(Pe& pe, Team& team, void* dst, const void* src, size_t count, DType dtype,
               CollAlgo algo);

// dst[0, bytes) = member root's src[0, bytes) on every member (root's dst may be its src).
// Hierarchical: the root's bytes cross to each other node once, then shared memory. Needs
// the same count of members on every node, contiguous in team order.
void broadcast(Pe& pe, Team& team, void* dst, const void* src, size_t bytes, int root);

// src holds n blocks of `count` elements, block j for member j; dst[i*count, ...) receives
// member i's block for this member. One algorithm: direct puts (n-1 per member).
void alltoall(Pe& pe, Team& team, void* dst, const void* src, size_t count, DType dtype);

// send_counts[j] elements (consecutive in src, in member order) go to member j; each member
// receives its blocks packed in member order into dst (room for dst_capacity elements).
// Returns the counts received from each member.
std::vector<size_t> alltoallv(Pe& pe, Team& team, void* dst, size_t dst_capacity, const void* src,
                              const std::vector<size_t>& send_counts, DType dtype);

}  // namespace symmesh
