// The pieces every collective is built from.
//
// RingChannel: chunks flow to the next team member through its team scratch, kSlots slots
// deep. A chunk is put into slot (seq % kSlots) with a put_signal of its sequence number; the
// receiver, once done with it, sets the sender's credit slot to the number it consumed, and a
// sender never reuses a slot the receiver has not consumed (flow control).
//
// Entered handshake: a member writes straight into another member's user buffer only once
// that member has announced it entered the same collective (its buffers are ready and no
// longer read by the previous call).
#pragma once

#include <vector>

#include "runtime/collectives/dtype.h"
#include "runtime/pe.h"

namespace symmesh {

struct Range {
  size_t begin = 0;
  size_t count = 0;
};

// Block i of `count` elements split over `parts`: [i*count/parts, (i+1)*count/parts).
Range block_range(size_t count, int parts, int i);
std::vector<Range> block_ranges(size_t count, int parts);

class RingChannel {
 public:
  static constexpr int kSlots = 4;
  static constexpr size_t kChunkBytes = kTeamScratchBytes / kSlots;

  RingChannel(Pe& pe, Team& team);
  // True when the next member has consumed enough for another chunk to go out now.
  bool can_send();
  // True when the next chunk from the previous member has arrived.
  bool can_receive();
  // Waits (with the PE's deadline) until can_send() or can_receive().
  void wait_for_progress();
  // Puts a chunk into the next member's scratch (waits for a free slot first).
  void send(const void* data, size_t bytes);
  // The next chunk from the previous member (in this PE's scratch); release() when done.
  const std::byte* receive();
  void release();

 private:
  Pe& pe_;
  Team& team_;
  int next_;
  int prev_;
};

class Contribution;

// Ring reduce-scatter of f32 values (cost: n-1 steps, (n-1)/n of the vector sent by each
// member, in chunks of the scratch slot size). `own` is this member's contribution, read
// where it is (contribution.h); on return `mine` (acc + blocks[me].begin when null) holds the
// reduction over the team of that block, written once as its last partial arrives (or loaded,
// for a team of one; acc's other blocks are scratch). Each element gets one operation per step (its
// own value with the partial sum arriving), so the result does not depend on timing (bitwise
// deterministic).
void ring_reduce_scatter_f32(Pe& pe, Team& team, const Contribution& own, float* acc,
                             const std::vector<Range>& blocks, float* mine = nullptr);

// Ring all-gather of byte blocks of the symmetric buffer `dst` (cost: n-1 steps, each
// member sends (n-1)/n of the buffer): on entry dst[blocks[me]] is filled, on return all.
void ring_allgather_bytes(Pe& pe, Team& team, std::byte* dst, const std::vector<Range>& blocks,
                          uint64_t sequence);

// After a step that used this member's whole team scratch outside the ring (a one-shot),
// once this member is done reading it: advances the ring's counters past every slot, so the
// ring's next chunks into this scratch wait for the credit sent here (all members call it).
void ring_skip_scratch(Pe& pe, Team& team);

// A per-thread f32 buffer of at least `count` values, reused across calls (not zeroed).
float* staging_f32(size_t count);

// Tells `writers` (team indices) that this member entered collective `sequence`.
void announce_entered(Pe& pe, Team& team, uint64_t sequence, const std::vector<int>& writers);
// Waits until team member `member` announced collective `sequence`.
void wait_entered(Pe& pe, Team& team, uint64_t sequence, int member);

}  // namespace symmesh
