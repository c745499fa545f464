#include "runtime/collectives/ring.h"

#include <algorithm>
#include <memory>

#include "runtime/collectives/contribution.h"

namespace symmesh {

Range block_range(size_t count, int parts, int i) {
  const size_t begin = count * size_t(i) / size_t(parts);
  const size_t end = count * size_t(i + 1) / size_t(parts);
  return Range{begin, end - begin};
}

std::vector<Range> block_ranges(size_t count, int parts) {
  std::vector<Range> ranges;
  for (int i = 0; i < parts; ++i) ranges.push_back(block_range(count, parts, i));
  return ranges;
}

RingChannel::RingChannel(Pe& pe, Team& team)
    : pe_(pe),
      team_(team),
      next_(team.pe((team.my_index() + 1) % team.size())),
      prev_(team.pe((team.my_index() + team.size() - 1) % team.size())) {
  // Ring chunks may fill any part of the scratch: the team's next one-shot announces itself
  // (one_shot.h). Every member builds the channel in the same calls, so they agree.
  team.set_last_one_shot(0);
}

bool RingChannel::can_send() {
  const uint64_t sequence = team_.ring_sent() + 1;
  return sequence <= uint64_t(kSlots) ||
         pe_.signal_fetch(pe_.sync_slot(team_, slot::kRingCredit)) >= sequence - kSlots;
}

bool RingChannel::can_receive() {
  const uint64_t sequence = team_.ring_received() + 1;
  const int slot_index = static_cast<int>(sequence % kSlots);
  return pe_.signal_fetch(pe_.sync_slot(team_, slot::kRingReady + slot_index)) >= sequence;
}

void RingChannel::wait_for_progress() {
  if (can_send() || can_receive()) return;
  const auto blocked_since = std::chrono::steady_clock::now();
  wait_until(
      pe_.node().doorbell(), pe_.deadline(), [&] { return can_send() || can_receive(); },
      [&] {
        return "PE " + std::to_string(pe_.my_pe()) + ": ring on team '" + team_.name() +
               "' waiting for PE " + std::to_string(next_) + " to free a scratch slot or PE " +
               std::to_string(prev_) + " to send a chunk";
      },
      pe_.node().wait_policy());
  // The neighbour that ended the wait was waited for (the previous one when both did).
  pe_.peer_waits().add(can_receive() ? prev_ : next_,
                       std::chrono::steady_clock::now() - blocked_since);
}

void RingChannel::send(const void* data, size_t bytes) {
  const uint64_t sequence = ++team_.ring_sent();
  const int slot_index = static_cast<int>(sequence % kSlots);
  // The slot was last used by chunk sequence - kSlots: wait until the receiver consumed it.
  if (sequence > uint64_t(kSlots)) {
    pe_.signal_wait_until(pe_.sync_slot(team_, slot::kRingCredit), Cmp::kGe, sequence - kSlots,
                          pe_.deadline(),
                          "ring on team '" + team_.name() + "' waiting for PE " +
                              std::to_string(next_) + " to free a scratch slot",
                          next_);
  }
  std::byte* target = pe_.team_scratch(team_) + slot_index * kChunkBytes;
  pe_.put_signal(target, data, bytes, pe_.sync_slot(team_, slot::kRingReady + slot_index), sequence,
                 SignalOp::kSet, next_);
}

const std::byte* RingChannel::receive() {
  const uint64_t sequence = team_.ring_received() + 1;
  const int slot_index = static_cast<int>(sequence % kSlots);
  pe_.signal_wait_until(
      pe_.sync_slot(team_, slot::kRingReady + slot_index), Cmp::kGe, sequence, pe_.deadline(),
      "ring on team '" + team_.name() + "' waiting for a chunk from PE " + std::to_string(prev_),
      prev_);
  return pe_.team_scratch(team_) + slot_index * kChunkBytes;
}

void RingChannel::release() {
  const uint64_t sequence = ++team_.ring_received();
  pe_.signal_set(pe_.sync_slot(team_, slot::kRingCredit), sequence, prev_);
}

void ring_skip_scratch(Pe& pe, Team& team) {
  team.ring_sent() += RingChannel::kSlots;
  team.ring_received() += RingChannel::kSlots;
  const int prev = team.pe((team.my_index() + team.size() - 1) % team.size());
  pe.signal_set(pe.sync_slot(team, slot::kRingCredit), team.ring_received(), prev);
}

namespace {

// One ring chunk of f32 values per thread, for the values a member computes only to send.
float* send_buffer() {
  thread_local std::unique_ptr<float[]> buffer(new float[RingChannel::kChunkBytes / sizeof(float)]);
  return buffer.get();
}

}  // namespace

float* staging_f32(size_t count) {
  thread_local std::unique_ptr<float[]> buffer;
  thread_local size_t capacity = 0;
  if (capacity < count) {
    buffer.reset(new float[count]);
    capacity = count;
  }
  return buffer.get();
}

void ring_reduce_scatter_f32(Pe& pe, Team& team, const Contribution& own, float* acc,
                             const std::vector<Range>& blocks, float* mine) {
  const int n = team.size();
  const int me = team.my_index();
  if (!mine) mine = acc + blocks[me].begin;
  if (n == 1) {
    own.load(blocks[me], mine);
    return;
  }
  constexpr size_t kChunk = RingChannel::kChunkBytes / sizeof(float);
  size_t largest = 0;
  for (const Range& block : blocks) largest = std::max(largest, block.count);
  const size_t chunks = std::max<size_t>(1, (largest + kChunk - 1) / kChunk);
  // At step s a member sends its partial of block (me - s - 1) and receives the partial of
  // block (me - s - 2); after n - 1 steps it holds the whole reduction of its own block.
  auto block_at_step = [&](size_t step) { return blocks[((me - int(step) - 1) % n + 2 * n) % n]; };
  auto chunk_of = [&](const Range& block, size_t c) {
    const size_t begin = std::min(block.count, c * kChunk);
    return Range{block.begin + begin, std::min(block.count, begin + kChunk) - begin};
  };
  // The order in which every member sends its (chunk, step) items, so the j-th item a member
  // receives is order[j] of its predecessor. Step 0 of a chunk (which needs nothing from
  // upstream) runs up to kSlots - 1 chunks ahead, keeping the wire busy.
  const size_t steps = size_t(n) - 1;
  const size_t lookahead = std::min<size_t>(RingChannel::kSlots - 1, chunks);
  std::vector<std::pair<size_t, size_t>> order;  // (chunk, step)
  std::vector<size_t> position(chunks * steps);
  auto add = [&](size_t c, size_t s) {
    position[c * steps + s] = order.size();
    order.emplace_back(c, s);
  };
  for (size_t c = 0; c < lookahead; ++c) add(c, 0);
  for (size_t c = 0; c < chunks; ++c) {
    if (c + lookahead < chunks) add(c + lookahead, 0);
    for (size_t s = 1; s < steps; ++s) add(c, s);
  }
  RingChannel ring(pe, team);
  size_t received = 0;
  // Every chunk a member receives is of a block it has not touched yet (it receives blocks
  // me-2, me-3, ..., me once each, and only sends block me-1): acc (`mine` for block me, the
  // last step's) is written there once, as its own values combined with the partial. Receiving
  // never sends, so a member waiting to send keeps receiving: no cycle of waits around the ring.
  auto receive_one = [&] {
    const auto [c, s] = order[received++];
    const Range in = chunk_of(block_at_step(s + 1), c);
    // The last step's block is this member's own: its sums go where the caller wants them.
    float* to = s + 1 == steps ? mine + (in.begin - blocks[me].begin) : acc + in.begin;
    own.add(in, reinterpret_cast<const float*>(ring.receive()), to);
    ring.release();
  };
  // Step 0 sends this member's own values of block me-1, never stored in acc.
  auto own_values = [&](const Range& out) {
    if (const float* values = own.find(out)) return values;
    float* buffer = send_buffer();
    own.load(out, buffer);
    return static_cast<const float*>(buffer);
  };
  for (const auto& [c, s] : order) {
    if (s > 0) {
      while (received <= position[c * steps + s - 1]) receive_one();
    }
    while (!ring.can_send()) {
      if (received < order.size() && ring.can_receive()) {
        receive_one();
      } else {
        ring.wait_for_progress();
      }
    }
    const Range out = chunk_of(block_at_step(s), c);
    ring.send(s == 0 ? own_values(out) : acc + out.begin, out.count * sizeof(float));
  }
  while (received < order.size()) receive_one();
}

void ring_allgather_bytes(Pe& pe, Team& team, std::byte* dst, const std::vector<Range>& blocks,
                          uint64_t sequence) {
  const int n = team.size();
  if (n == 1) return;
  const int me = team.my_index();
  const int next = (me + 1) % n;
  wait_entered(pe, team, sequence, next);
  for (int step = 0; step < n - 1; ++step) {
    const Range block = blocks[((me - step) % n + n) % n];
    uint64_t* step_signal = pe.sync_slot(team, slot::kPerStep + step);
    pe.put_signal(dst + block.begin, dst + block.begin, block.count, step_signal, sequence,
                  SignalOp::kSet, team.pe(next));
    pe.signal_wait_until(step_signal, Cmp::kGe, sequence, pe.deadline(),
                         "all-gather on team '" + team.name() + "' step " + std::to_string(step) +
                             " waiting for PE " + std::to_string(team.pe((me + n - 1) % n)),
                         team.pe((me + n - 1) % n));
  }
}

void announce_entered(Pe& pe, Team& team, uint64_t sequence, const std::vector<int>& writers) {
  uint64_t* slot = pe.sync_slot(team, slot::kEnteredFrom + team.my_index());
  for (int writer : writers) pe.signal_set(slot, sequence, team.pe(writer));
}

void wait_entered(Pe& pe, Team& team, uint64_t sequence, int member) {
  pe.signal_wait_until(
      pe.sync_slot(team, slot::kEnteredFrom + member), Cmp::kGe, sequence, pe.deadline(),
      "collective on team '" + team.name() + "' waiting for PE " + std::to_string(team.pe(member)) +
          " to enter call " + std::to_string(sequence),
      team.pe(member));
}

}  // namespace symmesh
