// reduce_rows and weighted_group_sum against the element-at-a-time definition: rows of mixed
// types across block edges, no rows, empty groups, one row copied, one row rounded.
#include "runtime/collectives/dtype.h"

#include <gtest/gtest.h>

#include <vector>

namespace symmesh {
namespace {

// Around the loops' edges: a prefetch chunk (64 elements) and a block (512).
const size_t kCounts[] = {1, 7, 63, 64, 65, 511, 512, 513, 1023, 1024, 1025, 3000};

std::vector<float> values(size_t count, int row) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = float(int((i * 37 + row * 11) % 201) - 100) / 7.0f;
  return out;
}

TEST(ReduceRows, MatchesAddingEachElementInOrderThenRoundingOnce) {
  for (size_t count : kCounts) {
    const std::vector<float> a = values(count, 1), b = values(count, 2), c = values(count, 3);
    std::vector<uint16_t> b_bf16(count), c_f16(count);
    store_from_f32(b_bf16.data(), b.data(), count, DType::kBF16);
    store_from_f32(c_f16.data(), c.data(), count, DType::kF16);
    // The first row is loaded, the others added: each type goes first once.
    const TypedRow f32_first[] = {
        {a.data(), DType::kF32}, {b_bf16.data(), DType::kBF16}, {c_f16.data(), DType::kF16}};
    const TypedRow bf16_first[] = {
        {b_bf16.data(), DType::kBF16}, {c_f16.data(), DType::kF16}, {a.data(), DType::kF32}};
    const TypedRow f16_first[] = {
        {c_f16.data(), DType::kF16}, {a.data(), DType::kF32}, {b_bf16.data(), DType::kBF16}};
    std::vector<float> a_first(count), b_first(count), c_first(count);
    for (size_t i = 0; i < count; ++i) {
      const float b_i = bf16_to_f32(b_bf16[i]), c_i = f16_to_f32(c_f16[i]);
      a_first[i] = a[i] + b_i + c_i;
      b_first[i] = b_i + c_i + a[i];
      c_first[i] = c_i + a[i] + b_i;
    }
    for (const auto& [rows, sum] : {std::pair{f32_first, &a_first}, std::pair{bf16_first, &b_first},
                                    std::pair{f16_first, &c_first}}) {
      for (DType out_type : {DType::kF32, DType::kBF16, DType::kF16}) {
        std::vector<std::byte> got(count * dtype_size(out_type)), want(got.size());
        reduce_rows(got.data(), out_type, rows, 3, count);
        store_from_f32(want.data(), sum->data(), count, out_type);
        EXPECT_EQ(got, want) << count << " elements into " << dtype_name(out_type) << ", first row "
                             << dtype_name(rows[0].dtype);
      }
    }
  }
}

TEST(ReduceRows, MaxAndMinCombineInRowOrderAcrossBlockEdges) {
  const size_t count = 2500;
  const std::vector<float> a = values(count, 5), b = values(count, 6), c = values(count, 7);
  const TypedRow rows[] = {
      {a.data(), DType::kF32}, {b.data(), DType::kF32}, {c.data(), DType::kF32}};
  for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
    std::vector<float> got(count), want(count);
    reduce_rows(got.data(), DType::kF32, rows, 3, count, op);
    for (size_t i = 0; i < count; ++i) want[i] = reduce_pair(reduce_pair(a[i], b[i], op), c[i], op);
    EXPECT_EQ(got, want) << reduce_op_name(op);
  }
}

TEST(ReduceRows, NoRowsGiveZerosAndOneRowIsCopiedOrRounded) {
  std::vector<uint16_t> out(2000, 0xffff);
  reduce_rows(out.data(), DType::kBF16, nullptr, 0, out.size());
  EXPECT_EQ(out, std::vector<uint16_t>(2000, 0));

  const std::vector<float> a = values(2000, 4);
  std::vector<float> copied(2000);
  const TypedRow row{a.data(), DType::kF32};
  reduce_rows(copied.data(), DType::kF32, &row, 1, a.size());
  EXPECT_EQ(copied, a);
  std::vector<uint16_t> rounded(2000), want(2000);
  reduce_rows(rounded.data(), DType::kBF16, &row, 1, a.size());
  store_from_f32(want.data(), a.data(), a.size(), DType::kBF16);
  EXPECT_EQ(rounded, want);
}

TEST(WeightedGroupSum, MatchesScalingAndAddingEachElementInOrderAcrossBlockEdges) {
  for (size_t count : kCounts) {
    const std::vector<float> a = values(count, 8), b = values(count, 9), c = values(count, 10);
    std::vector<uint16_t> b_bf16(count), c_f16(count);
    store_from_f32(b_bf16.data(), b.data(), count, DType::kBF16);
    store_from_f32(c_f16.data(), c.data(), count, DType::kF16);
    const WeightedRow rows[] = {{a.data(), DType::kF32, 0.3f},
                                {b_bf16.data(), DType::kBF16, -1.7f},
                                {c_f16.data(), DType::kF16, 0.05f},
                                {a.data(), DType::kF32, 1.3f}};
    const size_t ends[] = {2, 2, 4};  // groups {a, b}, {}, {c, a}
    std::vector<float> sum(count);
    for (size_t i = 0; i < count; ++i) {
      const float first = 0.3f * a[i] + -1.7f * bf16_to_f32(b_bf16[i]);
      const float second = 0.05f * f16_to_f32(c_f16[i]) + 1.3f * a[i];
      sum[i] = first + second;
    }
    for (DType out_type : {DType::kF32, DType::kBF16}) {
      std::vector<std::byte> got(count * dtype_size(out_type)), want(got.size());
      weighted_group_sum(got.data(), out_type, rows, ends, 3, count);
      store_from_f32(want.data(), sum.data(), count, out_type);
      EXPECT_EQ(got, want) << count << " elements into " << dtype_name(out_type);
    }
  }
}

TEST(WeightedGroupSum, NoGroupsGiveZerosAndOneRowIsScaledThenRounded) {
  std::vector<uint16_t> out(1500, 0xffff);
  weighted_group_sum(out.data(), DType::kBF16, nullptr, nullptr, 0, out.size());
  EXPECT_EQ(out, std::vector<uint16_t>(1500, 0));

  const std::vector<float> a = values(1500, 11);
  const WeightedRow row{a.data(), DType::kF32, 2.5f};
  const size_t end = 1;
  std::vector<float> scaled(a.size());
  weighted_group_sum(scaled.data(), DType::kF32, &row, &end, 1, a.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(scaled[i], 2.5f * a[i]) << i;
}

}  // namespace
}  // namespace symmesh
