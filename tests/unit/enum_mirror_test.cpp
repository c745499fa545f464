// The runtime's and the operators' enums read and write the wire's words: one list, the .proto's.
#include "wire/enum_mirror.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/errors.h"
#include "ops/enum_words.h"

namespace symmesh {
namespace {

template <class E>
std::string refusal(std::function<E()> call) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "accepted";
}

TEST(EnumMirror, EveryValueReadsAsItsWireWordAndParsesBack) {
  EXPECT_EQ(wire::word(DType::kBF16), "bf16");
  EXPECT_EQ(wire::word(CollAlgo::kHier), "hier");
  EXPECT_EQ(wire::word(FusedOp::kAllgatherMatmul), "allgather-matmul");
  EXPECT_EQ(wire::word(MoeAlgo::kLowLatency), "low-latency");
  EXPECT_EQ(wire::word_list<FusedMode>(), "fused, sequential, both, auto");
  for (auto algo :
       {BarrierAlgo::kDissemination, BarrierAlgo::kKary, BarrierAlgo::kPull, BarrierAlgo::kAuto}) {
    EXPECT_EQ(wire::parse_word<BarrierAlgo>(wire::word(algo), "--algo"), algo);
  }
  EXPECT_EQ(wire::to_wire(StageTransfer::kPush), wire::STAGE_TRANSFER_PUSH);
  EXPECT_EQ(wire::from_wire(wire::MOE_WEIGHTING_NONE, MoeWeighting::kTopk, "--weighting"),
            MoeWeighting::kNone);
}

TEST(EnumMirror, TheUnsetValueIsTheCallersDefault) {
  EXPECT_EQ(wire::from_wire(wire::DATA_TYPE_UNSPECIFIED, DType::kF16, "dtype"), DType::kF16);
  EXPECT_EQ(wire::from_wire(wire::REDUCTION_UNSPECIFIED, ReduceOp::kSum, "reduction"),
            ReduceOp::kSum);
}

// CollAlgo is CollectiveAlgo's ring and hier: the wire's auto and direct are not its values.
TEST(EnumMirror, AValueTheCxxEnumDoesNotCoverIsRefusedNamingTheOnesItHas) {
  EXPECT_EQ(refusal<CollAlgo>([] { return wire::parse_word<CollAlgo>("direct", "--algo"); }),
            "--algo 'direct' is not one of: ring, hier");
  EXPECT_EQ(refusal<CollAlgo>([] {
              return wire::from_wire(wire::COLLECTIVE_ALGO_AUTO, CollAlgo::kHier, "algorithm");
            }),
            "algorithm is 'auto'; allowed: ring, hier");
  EXPECT_EQ(refusal<DType>([] { return wire::from_wire(42, DType::kF32, "dtype"); }),
            "dtype is '#42'; allowed: f32, bf16, f16");
  EXPECT_EQ(refusal<MoeAlgo>([] { return wire::parse_word<MoeAlgo>("ring", "--algo"); }),
            "--algo 'ring' is not one of: hier, flat, low-latency");
}

}  // namespace
}  // namespace symmesh
