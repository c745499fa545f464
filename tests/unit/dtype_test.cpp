// reduce_rows and weighted_group_sum against the element-at-a-time definition: rows of mixed
// types across block edges, no rows, empty groups, one row copied, one row rounded; bf16 rows
// alone (the combine's case, summed by a kernel of its own on a CPU with AVX-512) with NaNs,
// infinities, signed zeros and subnormals, each row in an allocation of its own size.
#include "runtime/collectives/dtype.h"
#include "runtime/collectives/reduce_kernels.h"
#include "runtime/enum_words.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
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
        EXPECT_EQ(got, want) << count << " elements into " << wire::word(out_type) << ", first row "
                             << wire::word(rows[0].dtype);
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
    EXPECT_EQ(got, want) << "reduction " << int(op);
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
      EXPECT_EQ(got, want) << count << " elements into " << wire::word(out_type);
    }
  }
}

// Equal bits, or both NaN: which of two NaNs a sum keeps is not specified (dtype.h).
bool same_bf16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  auto nan = [](uint16_t v) { return (v & 0x7fff) > 0x7f80; };
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i] && !(nan(a[i]) && nan(b[i]))) return false;
  }
  return true;
}

TEST(WeightedGroupSum, Bf16RowsGiveTheDefinitionsBitsWhateverTheirValues) {
  const uint16_t special[] = {0x7fc1, 0x7f81, 0x7f80, 0xff80, 0x8000, 0x0001, 0x7f7f};
  for (size_t count : kCounts) {
    std::vector<std::vector<uint16_t>> row(4);
    for (size_t r = 0; r < row.size(); ++r) {
      row[r].resize(count);  // exactly its elements: a read past its end is out of bounds
      store_from_f32(row[r].data(), values(count, int(r) + 20).data(), count, DType::kBF16);
      // Each row's specials at its own elements: no two different NaNs are added.
      for (size_t i = r; i < count; i += 61) row[r][i] = special[(i / 61) % std::size(special)];
    }
    // Weights of one size, so that every group's order and rounding reach the result.
    const float w[] = {0.7f, -2.25f, 1.5f, 0.0f, -0.0f, 3.0f};
    const WeightedRow rows[] = {
        {row[0].data(), DType::kBF16, w[0]}, {row[1].data(), DType::kBF16, w[1]},
        {row[2].data(), DType::kBF16, w[2]}, {row[3].data(), DType::kBF16, w[3]},
        {row[0].data(), DType::kBF16, w[4]}, {row[1].data(), DType::kBF16, w[5]}};
    const size_t ends[] = {2, 2, 3, 6};  // groups {0, 1}, {}, {2}, {3, 0, 1}
    std::vector<uint16_t> got(count), want(count), portable(count);
    for (size_t i = 0; i < count; ++i) {
      auto x = [&](size_t r) { return bf16_to_f32(row[r][i]); };
      const float first = w[0] * x(0) + w[1] * x(1);
      const float second = w[2] * x(2);
      const float third = w[3] * x(3) + w[4] * x(0) + w[5] * x(1);
      want[i] = f32_to_bf16(first + second + third);
    }
    weighted_group_sum(got.data(), DType::kBF16, rows, ends, 4, count);
    EXPECT_EQ(got, want) << count << " elements";

    // The portable loop on the same terms: one row given as its exact f32 widening keeps the
    // arithmetic and takes the loop instead of a bf16 kernel.
    std::vector<float> row3_f32(count);
    load_f32(row3_f32.data(), row[3].data(), count, DType::kBF16);
    WeightedRow through_loop[std::size(rows)];
    std::copy(std::begin(rows), std::end(rows), through_loop);
    through_loop[3] = {row3_f32.data(), DType::kF32, w[3]};
    weighted_group_sum(portable.data(), DType::kBF16, through_loop, ends, 4, count);
    EXPECT_TRUE(same_bf16(got, portable)) << count << " elements against the portable loop";

    // A NaN with low payload bits, which rounding to nearest would carry into the bf16 word:
    // it is cut, not rounded like a number.
    const uint32_t nan_bits = 0x7fa0ffffu;
    float nan;
    std::memcpy(&nan, &nan_bits, sizeof nan);
    const std::vector<float> plain = values(count, 30);
    std::vector<uint16_t> plain_bf16(count);
    store_from_f32(plain_bf16.data(), plain.data(), count, DType::kBF16);
    const WeightedRow scaled_by_nan{plain_bf16.data(), DType::kBF16, nan};
    const size_t one = 1;
    for (size_t i = 0; i < count; ++i) want[i] = f32_to_bf16(nan * bf16_to_f32(plain_bf16[i]));
    weighted_group_sum(got.data(), DType::kBF16, &scaled_by_nan, &one, 1, count);
    EXPECT_EQ(got, want) << count << " elements scaled by a NaN";

    // Terms that nearly cancel: each product's rounding reaches the bf16 result, so a fused
    // multiply-add (one rounding) gives other bits.
    const WeightedRow cancelling[] = {{row[2].data(), DType::kBF16, 0.7f},
                                      {row[2].data(), DType::kBF16, -0.6999f}};
    const size_t pair = 2;
    for (size_t i = 0; i < count; ++i) {
      const float x = bf16_to_f32(row[2][i]);
      want[i] = f32_to_bf16(0.7f * x + -0.6999f * x);
    }
    weighted_group_sum(got.data(), DType::kBF16, cancelling, &pair, 1, count);
    EXPECT_TRUE(same_bf16(got, want)) << count << " elements that nearly cancel";

    // Negative zeros stay negative: a sum that starts from +0 would lose them. The first
    // group is empty.
    const std::vector<uint16_t> negative_zero(count, 0x8000);
    const WeightedRow zeros[] = {{negative_zero.data(), DType::kBF16, 1.0f},
                                 {negative_zero.data(), DType::kBF16, 2.0f}};
    const size_t zero_ends[] = {0, 2};
    weighted_group_sum(got.data(), DType::kBF16, zeros, zero_ends, 2, count);
    EXPECT_EQ(got, negative_zero) << count << " elements of -0";
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
