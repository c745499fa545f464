#include "runtime/collectives/one_shot.h"

#include <vector>

#include "runtime/collectives/reduce_kernels.h"
#include "runtime/collectives/ring.h"
#include "runtime/layout.h"

namespace symmesh {

namespace {

// Above this a member's vector is better split by the ring: measured on 2 nodes x 2 ranks
// over TCP (docs/PERFORMANCE.md), the one-shot was faster for parts of 2, 32 and 128 KiB and
// slower for 256 KiB and up.
constexpr size_t kOneShotMaxBytes = size_t{128} << 10;

constexpr size_t kHalfBytes = kTeamScratchBytes / 2;

// Whether collective `sequence` follows a one-shot on the team, so it needs no announcement.
bool follows_one_shot(const Team& team, uint64_t sequence) {
  return team.last_one_shot() != 0 && team.last_one_shot() + 1 == sequence;
}

}  // namespace

bool one_shot_suits(size_t count, int members) {
  const size_t bytes = count * sizeof(float);
  return members > 1 && bytes <= kOneShotMaxBytes && bytes * size_t(members) <= kHalfBytes;
}

uint64_t one_shot_enter(Pe& pe, Team& team) {
  const uint64_t sequence = team.next_collective();
  if (follows_one_shot(team, sequence)) return sequence;
  std::vector<int> others;
  for (int j = 0; j < team.size(); ++j) {
    if (j != team.my_index()) others.push_back(j);
  }
  announce_entered(pe, team, sequence, others);
  return sequence;
}

void one_shot_allreduce_f32(Pe& pe, Team& team, uint64_t sequence, void* dst, const float* acc,
                            size_t count, DType dtype, ReduceOp op) {
  const int n = team.size();
  const int me = team.my_index();
  const size_t bytes = count * sizeof(float);
  // Member j's vector lands in slot j of the call's half of each receiver's scratch.
  std::byte* scratch = pe.team_scratch(team) + (sequence % 2) * kHalfBytes;
  const bool announced = !follows_one_shot(team, sequence);
  for (int step = 1; step < n; ++step) {
    const int j = (me + step) % n;  // each member starts with a different receiver
    if (announced) wait_entered(pe, team, sequence, j);
    pe.put_signal(scratch + size_t(me) * bytes, acc, bytes,
                  pe.sync_slot(team, slot::kPerSource + me), sequence, SignalOp::kSet, team.pe(j));
  }
  std::vector<TypedRow> rows;
  for (int j = 0; j < n; ++j) {
    if (j == me) {
      rows.push_back({acc, DType::kF32});
      continue;
    }
    pe.signal_wait_until(pe.sync_slot(team, slot::kPerSource + j), Cmp::kGe, sequence,
                         pe.deadline(),
                         "one-shot all-reduce on team '" + team.name() + "' waiting for PE " +
                             std::to_string(team.pe(j)),
                         team.pe(j));
    rows.push_back({scratch + size_t(j) * bytes, DType::kF32});
  }
  // Block by block, every row read before the block is written: acc may be dst.
  reduce_rows(dst, dtype, rows.data(), rows.size(), count, op);
  ring_skip_scratch(pe, team);
  team.set_last_one_shot(sequence);
}

}  // namespace symmesh
