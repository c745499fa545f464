// A PE's staging area as the process and the daemon share it: its mapping never moves as it
// grows (a pointer into it stays good, with its bytes), calls place their blocks in the first
// gap between the outputs lent out and past every one when they outgrow it, a loan is given
// back when dropped and outlives its area's other owners, and the daemon refuses blocks whose
// outputs would land on the inputs, naming the field.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>

#include "api/staging_area.h"
#include "api/staging_layout.h"
#include "api/staging_loans.h"
#include "common/errors.h"
#include "daemon/jobs/staged_blocks.h"

namespace symmesh {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// A staging area over a fresh memfd, as the daemon makes one (after the ring's bytes).
std::shared_ptr<attach::StagingArea> area_of(uint64_t bytes) {
  const int fd = memfd_create("staging-test", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  auto area = std::make_shared<attach::StagingArea>(fd);
  area->grow(bytes, "the test");
  return area;
}

TEST(StagingArea, GrowingKeepsEveryByteWhereItWas) {
  const auto area = area_of(kMiB);
  std::byte* first = area->range(0, kMiB, "the first MiB");
  std::memset(first, 0x5a, kMiB);
  area->grow(8 * kMiB, "the test");
  EXPECT_EQ(area->bytes(), 8 * kMiB);
  EXPECT_EQ(area->range(0, kMiB, "the first MiB"), first) << "the mapping moved";
  EXPECT_EQ(first[kMiB - 1], std::byte{0x5a});
  std::memset(area->range(kMiB, 7 * kMiB, "the tail"), 0x11, 7 * kMiB);  // mapped and writable
  area->map(kMiB);  // a smaller size keeps the mapping
  EXPECT_EQ(area->bytes(), 8 * kMiB);
}

TEST(StagingArea, ASizeOffAPageOrPastTheMostIsRefusedNamingIt) {
  const auto area = area_of(kMiB);
  for (const uint64_t bytes : {kMiB + 100, attach::kMaxStagingBytes + 4096}) {
    try {
      area->map(bytes);
      FAIL() << bytes << " was mapped";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("allowed whole"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(area->bytes(), kMiB);
}

TEST(StagingLoans, ACallGoesInTheFirstGapThatHoldsItAndSpillsPastEveryLoan) {
  const auto loans = std::make_shared<StagingLoans>(area_of(kMiB));
  attach::Request r;
  loans->place(r, 100, 1000);
  EXPECT_EQ(r.stage_at, 0u) << "nothing is lent: from the start";
  EXPECT_EQ(r.stage_room, attach::kMaxStagingBytes);
  EXPECT_EQ(attach::staged_outputs_at(r, 100, 1000), 128u) << "right after the inputs";

  const auto low = loans->lend(0, 4096);
  const auto high = loans->lend(16384, 100);
  ASSERT_TRUE(low && high);
  EXPECT_EQ(loans->outstanding(), 2u);
  loans->place(r, 4000, 8000);  // fits between the loans: [4096, 16384)
  EXPECT_EQ(r.stage_at, 4096u);
  EXPECT_EQ(r.stage_room, 16384u - 4096u);
  EXPECT_EQ(attach::staged_outputs_at(r, 4000, 8000), 4096u + 4032u);
  EXPECT_EQ(attach::staged_outputs_at(r, 4000, 9000), 16384u + 128u)
      << "outputs larger than expected go past every loan";
  loans->place(r, 4000, 9000);  // does not fit between them: past the last
  EXPECT_EQ(r.stage_at, 16384u + 128u);
}

TEST(StagingLoans, ALoanIsGivenBackWhenDroppedAndKeepsItsBytesPastTheAreasOwner) {
  auto area = area_of(kMiB);
  const auto loans = std::make_shared<StagingLoans>(area);
  std::memset(area->range(0, 64, "the test"), 7, 64);
  auto loan = loans->lend(0, 64);
  EXPECT_EQ(loans->lend(64, 0), nullptr) << "no loan of no bytes";
  area.reset();  // the session's own reference goes; the loan keeps the mapping
  EXPECT_EQ(loan->data()[63], std::byte{7});
  attach::Request r;
  loans->place(r, 10, 10);
  EXPECT_EQ(r.stage_at, 64u) << "not over the loan";
  loan.reset();
  EXPECT_EQ(loans->outstanding(), 0u);
  loans->place(r, 10, 10);
  EXPECT_EQ(r.stage_at, 0u) << "the bytes came back";
}

TEST(StagedBlocks, OutputsLandApartFromTheInputsAndAHostilePlaceIsNamed) {
  attach::Request r{.stage_at = 4096, .stage_room = 1000, .spill_at = 8192};
  const StagedBlocks blocks(r, 200);
  EXPECT_EQ(blocks.inputs(), 4096u);
  EXPECT_EQ(blocks.outputs(700), 4096u + 256u);
  EXPECT_EQ(blocks.outputs(800), 8192u) << "past the room: spilled";

  const auto refused = [](attach::Request bad, const std::string& says) {
    try {
      StagedBlocks(bad, 200);
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused({.stage_at = 100, .spill_at = 8192}, "stage_at = 100: allowed a multiple of 64");
  refused({.stage_at = attach::kMaxStagingBytes + 64, .spill_at = attach::kMaxStagingBytes + 512},
          "stage_at");
  refused({.stage_at = 4096, .spill_at = 4160}, "spill_at = 4160 is not past the call's inputs");
  refused({.stage_at = 4096, .spill_at = 0}, "spill_at = 0 is not past");
}

}  // namespace
}  // namespace symmesh
