// oneDNN GEMM for the fused operators: every input type against an f32 reference, strided
// tiles of a larger matrix, accumulation, the primitive cache, and shape errors.
#include "ops/gemm.h"

#include <gtest/gtest.h>

#include "common/errors.h"
#include "runtime/enum_words.h"

namespace symmesh {
namespace {

// Values k/8 with small k: exact in bf16 and f16, and their products sum exactly in f32.
std::vector<float> values(size_t count, int seed) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) out[i] = float(int((i * 7 + seed * 13) % 17) - 8) / 8.0f;
  return out;
}

std::vector<uint16_t> as_half(const std::vector<float>& in, DType type) {
  std::vector<uint16_t> out(in.size());
  store_from_f32(out.data(), in.data(), in.size(), type);
  return out;
}

// C[i][j] (+)= sum_k A[i][k] B[k][j] on strided views, in f32.
void reference(const GemmShape& s, const float* a, const float* b, float* c, bool accumulate) {
  for (int64_t i = 0; i < s.m; ++i) {
    for (int64_t j = 0; j < s.n; ++j) {
      float sum = accumulate ? c[i * s.ldc + j] : 0.0f;
      for (int64_t k = 0; k < s.k; ++k) sum += a[i * s.lda + k] * b[k * s.ldb + j];
      c[i * s.ldc + j] = sum;
    }
  }
}

class GemmTypes : public ::testing::TestWithParam<DType> {};

TEST_P(GemmTypes, StridedTilesMatchTheReferenceExactly) {
  const DType type = GetParam();
  Gemm gemm;
  // A tile of 37 x 45 (k = 29) inside larger matrices: odd sizes, not multiples of anything.
  const GemmShape s{37, 45, 29, 40, 50, 64};
  const auto a = values(size_t(s.m) * s.lda, 1);
  const auto b = values(size_t(s.k) * s.ldb, 2);
  std::vector<float> expected(size_t(s.m) * s.ldc, 0.5f), got = expected;
  reference(s, a.data(), b.data(), expected.data(), false);
  const bool half = type != DType::kF32;
  const auto a_half = half ? as_half(a, type) : std::vector<uint16_t>();
  const auto b_half = half ? as_half(b, type) : std::vector<uint16_t>();
  const void* pa = half ? static_cast<const void*>(a_half.data()) : a.data();
  const void* pb = half ? static_cast<const void*>(b_half.data()) : b.data();
  gemm.multiply(s, type, pa, pb, got.data(), false);
  EXPECT_EQ(got, expected) << gemm.path(type);
  reference(s, a.data(), b.data(), expected.data(), true);
  gemm.multiply(s, type, pa, pb, got.data(), true);
  EXPECT_EQ(got, expected) << "accumulate: " << gemm.path(type);
  EXPECT_EQ(gemm.path(type).rfind(wire::word(type), 0), 0u) << gemm.path(type);
}

INSTANTIATE_TEST_SUITE_P(Types, GemmTypes,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return wire::word(info.param); });

TEST(Gemm, OnePrimitivePerTileShape) {
  Gemm gemm;
  const GemmShape tile{16, 16, 16, 64, 64, 64};
  const auto a = values(64 * 64, 3), b = values(64 * 64, 4);
  std::vector<float> c(64 * 64);
  for (int row = 0; row < 4; ++row) {
    for (int col = 0; col < 4; ++col) {
      gemm.multiply(tile, DType::kF32, a.data() + row * 16 * 64, b.data() + col * 16,
                    c.data() + row * 16 * 64 + col * 16, false);
    }
  }
  EXPECT_EQ(gemm.primitives_created(), 1u);
  gemm.multiply(GemmShape{5, 16, 16, 64, 64, 64}, DType::kF32, a.data(), b.data(), c.data(), false);
  EXPECT_EQ(gemm.primitives_created(), 2u) << "a ragged tail is a second shape";
}

// A daemon serves jobs of ever new shapes: the cache keeps the most recently used primitives
// only, and a shape whose primitive was dropped is created again with the same result.
TEST(Gemm, TheCacheDropsTheLeastRecentlyUsedPrimitive) {
  Gemm gemm(2);
  const auto a = values(64 * 64, 5), b = values(64 * 64, 6);
  auto run = [&](int64_t m) {
    const GemmShape shape{m, 16, 16, 64, 64, 64};
    std::vector<float> got(64 * 64), want(64 * 64);
    gemm.multiply(shape, DType::kF32, a.data(), b.data(), got.data(), false);
    reference(shape, a.data(), b.data(), want.data(), false);
    EXPECT_EQ(got, want) << "m=" << m;
  };
  run(4);
  run(8);
  run(12);  // drops m=4, the least recently used
  EXPECT_EQ(gemm.primitives_cached(), 2u);
  EXPECT_EQ(gemm.primitives_created(), 3u);
  run(8);  // cached: now the most recently used
  EXPECT_EQ(gemm.primitives_created(), 3u);
  run(4);  // created again; drops m=12
  EXPECT_EQ(gemm.primitives_created(), 4u);
  run(8);
  EXPECT_EQ(gemm.primitives_created(), 4u);
  run(12);
  EXPECT_EQ(gemm.primitives_created(), 5u);
  EXPECT_EQ(gemm.primitives_cached(), 2u);
  EXPECT_THROW(Gemm(0), InvalidArgument);
}

TEST(Gemm, BadShapesNameTheField) {
  Gemm gemm;
  float x = 0;
  try {
    gemm.multiply(GemmShape{4, 4, 4, 2, 4, 4}, DType::kF32, &x, &x, &x, false);
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("lda = 2 must be at least 4"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(gemm.multiply(GemmShape{0, 4, 4, 4, 4, 4}, DType::kF32, &x, &x, &x, false),
               InvalidArgument);
}

}  // namespace
}  // namespace symmesh
