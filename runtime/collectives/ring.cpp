#include "runtime/collectives/ring.h"

#include <algorithm>

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
      prev_(team.pe((team.my_index() + team.size() - 1) % team.size())) {}

void RingChannel::send(const void* data, size_t bytes) {
  const uint64_t sequence = ++team_.ring_sent();
  const int slot_index = static_cast<int>(sequence % kSlots);
  // The slot was last used by chunk sequence - kSlots: wait until the receiver consumed it.
  if (sequence > uint64_t(kSlots)) {
    pe_.signal_wait_until(pe_.sync_slot(team_, slot::kRingCredit), Cmp::kGe, sequence - kSlots,
                          pe_.deadline(),
                          "ring on team '" + team_.name() + "' waiting for PE " +
                              std::to_string(next_) + " to free a scratch slot");
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
      "ring on team '" + team_.name() + "' waiting for a chunk from PE " + std::to_string(prev_));
  return pe_.team_scratch(team_) + slot_index * kChunkBytes;
}

void RingChannel::release() {
  const uint64_t sequence = ++team_.ring_received();
  pe_.signal_set(pe_.sync_slot(team_, slot::kRingCredit), sequence, prev_);
}

void ring_reduce_scatter_f32(Pe& pe, Team& team, float* acc, const std::vector<Range>& blocks,
                             ReduceOp op) {
  const int n = team.size();
  if (n == 1) return;
  const int me = team.my_index();
  constexpr size_t kChunk = RingChannel::kChunkBytes / sizeof(float);
  size_t largest = 0;
  for (const Range& block : blocks) largest = std::max(largest, block.count);
  const size_t chunks = std::max<size_t>(1, (largest + kChunk - 1) / kChunk);
  RingChannel ring(pe, team);
  // At step s a member sends block (me - s - 1) and receives block (me - s - 2); after
  // n - 1 steps it has received every other member's share of its own block.
  auto block_at_step = [&](int step) { return blocks[((me - step - 1) % n + 2 * n) % n]; };
  auto chunk_of = [&](const Range& block, size_t c) {
    const size_t begin = std::min(block.count, c * kChunk);
    return Range{block.begin + begin, std::min(block.count, begin + kChunk) - begin};
  };
  for (size_t c = 0; c < chunks; ++c) {
    Range out = chunk_of(block_at_step(0), c);
    ring.send(acc + out.begin, out.count * sizeof(float));
    for (int step = 0; step < n - 1; ++step) {
      const Range in = chunk_of(block_at_step(step + 1), c);
      const std::byte* data = ring.receive();
      accumulate(acc + in.begin, data, in.count, DType::kF32, op);
      ring.release();
      if (step + 1 < n - 1) ring.send(acc + in.begin, in.count * sizeof(float));
    }
  }
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
                             " waiting for PE " + std::to_string(team.pe((me + n - 1) % n)));
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
          " to enter call " + std::to_string(sequence));
}

}  // namespace symmesh
