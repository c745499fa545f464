// The words of the wire's enums: what the CLI accepts, the JSON prints and the daemon names
// when it refuses a value.
#include "wire/enum_text.h"

#include <gtest/gtest.h>

#include "common/errors.h"
#include "wire/jobs.pb.h"

namespace symmesh {
namespace {

TEST(EnumText, AValueReadsAsItsLowerCaseWordWithDashes) {
  EXPECT_EQ(wire::enum_text(wire::COLLECTIVE_OP_REDUCE_SCATTER), "reduce-scatter");
  EXPECT_EQ(wire::enum_text(wire::TRANSPORT_OP_PUT_SIGNAL_LAT), "put-signal-lat");
  EXPECT_EQ(wire::enum_text(wire::DATA_TYPE_BF16), "bf16");
  EXPECT_EQ(wire::enum_text(wire::JOB_STATE_CANCELLING), "cancelling");
  EXPECT_EQ(wire::enum_text(wire::COLLECTIVE_OP_UNSPECIFIED), "");
  EXPECT_EQ(wire::enum_text(wire::CollectiveOp(42)), "#42");
}

TEST(EnumText, EveryWordParsesBackToItsValue) {
  const auto& type = wire::descriptor_of<wire::MatmulOp>();
  const std::vector<std::string> words = wire::enum_words<wire::MatmulOp>();
  ASSERT_EQ(words, (std::vector<std::string>{"matmul-reduce-scatter", "gemm-allreduce",
                                             "allgather-matmul"}));
  for (const auto& word : words) {
    EXPECT_EQ(wire::enum_text(type, wire::enum_number(type, word)), word);
  }
  EXPECT_EQ(wire::parse_enum<wire::MatmulOp>("gemm-allreduce", "--op"),
            wire::MATMUL_OP_GEMM_ALLREDUCE);
}

TEST(EnumText, AWordNoValueHasIsRefusedNamingTheAllowedOnes) {
  try {
    wire::parse_enum<wire::CollectiveAlgo>("tree", "--algo");
    FAIL() << "tree was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "--algo 'tree' is not one of: auto, ring, hier, direct");
  }
  // The unset value has no word: "unspecified" is not a choice.
  EXPECT_THROW(wire::parse_enum<wire::DataType>("unspecified", "--dtype"), InvalidArgument);
}

TEST(EnumText, ANumberFromThePeerIsCheckedAgainstTheEnum) {
  EXPECT_NO_THROW(wire::check_enum(wire::DATA_TYPE_F16, "--dtype"));
  EXPECT_NO_THROW(wire::check_enum(wire::DATA_TYPE_UNSPECIFIED, "--dtype", true));
  try {
    wire::check_enum(wire::DataType(7), "--dtype", true);
    FAIL() << "7 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "--dtype is 7; allowed: f32, bf16, f16");
  }
  try {
    wire::check_enum(wire::COLLECTIVE_OP_UNSPECIFIED, "--op");
    FAIL() << "an unset required value was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(),
                 "--op is not set; allowed: allreduce, reduce-scatter, allgather, alltoall");
  }
}

}  // namespace
}  // namespace symmesh
