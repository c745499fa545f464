// Where things live in a PE's slice of the node segment. Every PE's slice has the same
// layout, so a symmetric object has the same offset in every slice:
//
//   [ sync pool: kMaxTeams x kSlotsPerTeam cache-line signal slots ]
//   [ team scratch: kMaxTeams x kTeamScratchBytes (ring collective chunks) ]
//   [ user heap: symmetric malloc ]
//
// Each signal slot is a 64-bit epoch counter alone on its cache line (the SHMEM barrier design:
// padded slots, counters rather than flags, one sync pool per team).
#pragma once

#include <cstddef>
#include <cstdint>

namespace symmesh {

inline constexpr size_t kCacheLine = 64;
inline constexpr int kMaxTeams = 8;
inline constexpr int kSlotsPerTeam = 3072;
inline constexpr int kMaxTeamSize = 512;
inline constexpr size_t kSyncPoolBytes = size_t{kMaxTeams} * kSlotsPerTeam * kCacheLine;
inline constexpr size_t kTeamScratchBytes = size_t{1} << 20;
inline constexpr size_t kReservedBytes = kSyncPoolBytes + kMaxTeams * kTeamScratchBytes;
inline constexpr size_t kSliceAlignment = 4096;
inline constexpr size_t kMinUserHeapBytes = size_t{1} << 20;

// Slot numbers inside one team's pool.
namespace slot {
inline constexpr int kPullArrival = 0;    // V3: this PE's own arrival counter
inline constexpr int kDissemination = 1;  // V1: one slot per round (up to 32)
inline constexpr int kKary = 33;          // V2: round * (k - 1) + j - 1 (k <= 16, 16 rounds)
inline constexpr int kKaryEnd = kKary + 16 * 15;
inline constexpr int kIntraArrival = 280;   // intra-node barrier: this PE's arrival
inline constexpr int kIntraRelease = 281;   // intra-node barrier: the leader's release
inline constexpr int kRingReady = 288;      // ring: one per scratch chunk slot (up to 32)
inline constexpr int kRingCredit = 320;     // ring: chunks the receiver has consumed
inline constexpr int kExchangeValue = 512;  // small exchanges: one value per team member
inline constexpr int kPerSource = 1024;     // one signal per team member (all-to-all)
inline constexpr int kPerStep = 1536;       // one signal per ring step (all-gather)
inline constexpr int kEnteredFrom = 2048;   // member i entered collective number ... (i slots)
// Pe::team_of_nodes, in its team index's pool: per PE (its global number) the last counter
// start it proposed to this one.
inline constexpr int kNodesClock = 2560;
}  // namespace slot
static_assert(slot::kKaryEnd <= slot::kIntraArrival);
static_assert(slot::kEnteredFrom + kMaxTeamSize <= slot::kNodesClock);
static_assert(slot::kNodesClock + kMaxTeamSize <= kSlotsPerTeam);

inline constexpr uint64_t sync_slot_offset(int team_index, int slot_number) {
  return (uint64_t(team_index) * kSlotsPerTeam + uint64_t(slot_number)) * kCacheLine;
}

inline constexpr uint64_t team_scratch_offset(int team_index) {
  return kSyncPoolBytes + uint64_t(team_index) * kTeamScratchBytes;
}

}  // namespace symmesh
