#include "runtime/collectives/bf16_weighted_sum.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

// GCC 12 takes the deliberately undefined inputs of its own AVX-512 intrinsics
// (_mm512_undefined_epi32) for uninitialised variables once they are inlined (GCC bug 105593).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#elif defined(__x86_64__)
#include <immintrin.h>
#endif

// The bits rest on this file being compiled with -ffp-contract=off (runtime/CMakeLists.txt):
// AVX-512 has fused multiply-add, and a contracted multiply-then-add rounds once where the portable
// loop rounds twice.
namespace symmesh {

#if defined(__x86_64__)
namespace {

// A chunk: four vectors of 16 elements, two cache lines of bf16, summed in registers. Each
// row's lines kAhead elements further on (the portable loops' block) are fetched as its chunk
// is summed, as those loops do: rows in memory otherwise wait for each line in turn.
constexpr size_t kVectors = 4, kChunk = 16 * kVectors, kAhead = 512;

[[gnu::target("avx512f")]] inline __m512 widen(const uint16_t* bf16) {
  const __m256i half = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bf16));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(half), 16));
}

// f32_to_bf16() on 16 elements: round to nearest even, a NaN kept quiet; the words in 32 bits.
// (The sums' NaNs come from arithmetic and are quiet already; the NaN step keeps their payload
// from being rounded like a number's.)
[[gnu::target("avx512f")]] inline __m512i round_to_bf16(__m512 value) {
  const __m512i word = _mm512_castps_si512(value);
  const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(word, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(word, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(
      _mm512_and_si512(word, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(word, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_blend_epi32(nan, rounded, quiet);
}

// Row `row`'s chunk at `at`, of `n` elements: read where it is, or, when it is a row's last and
// shorter than kChunk, through a zeroed copy in `partial`, so that no load passes the row's end.
inline const uint16_t* chunk_of(const WeightedRow& row, size_t at, size_t n,
                                uint16_t (&partial)[kChunk]) {
  const uint16_t* x = static_cast<const uint16_t*>(row.data) + at;
  if (n == kChunk) return x;
  std::memset(partial, 0, sizeof partial);
  return static_cast<const uint16_t*>(std::memcpy(partial, x, n * sizeof(uint16_t)));
}

// acc = the chunk's groups summed, each group's rows scaled and added in order, as
// weighted_group_sum() does.
[[gnu::target("avx512f")]] void sum_chunk(__m512 (&acc)[kVectors], const WeightedRow* rows,
                                          const size_t* group_ends, size_t groups, size_t at,
                                          size_t n) {
  alignas(64) uint16_t partial[kChunk];
  bool summed = false;
  std::fill(acc, acc + kVectors, _mm512_setzero_ps());  // no rows: zeros
  for (size_t g = 0, first = 0; g < groups; first = group_ends[g++]) {
    if (group_ends[g] == first) continue;  // an empty group adds nothing
    const uint16_t* x = chunk_of(rows[first], at, n, partial);
    __m512 weight = _mm512_set1_ps(rows[first].weight);
    __m512 sum[kVectors];
    for (size_t k = 0; k < kVectors; ++k) sum[k] = _mm512_mul_ps(weight, widen(x + 16 * k));
    for (size_t r = first + 1; r < group_ends[g]; ++r) {
      x = chunk_of(rows[r], at, n, partial);
      weight = _mm512_set1_ps(rows[r].weight);
      for (size_t k = 0; k < kVectors; ++k)
        sum[k] = _mm512_add_ps(sum[k], _mm512_mul_ps(weight, widen(x + 16 * k)));
    }
    for (size_t k = 0; k < kVectors; ++k) acc[k] = summed ? _mm512_add_ps(acc[k], sum[k]) : sum[k];
    summed = true;
  }
}

[[gnu::target("avx512f")]] void weighted_group_sum_avx512(uint16_t* dst, const WeightedRow* rows,
                                                          const size_t* group_ends, size_t groups,
                                                          size_t count) {
  const size_t row_count = groups == 0 ? 0 : group_ends[groups - 1];
  for (size_t at = 0; at < count; at += kChunk) {
    const size_t n = std::min(kChunk, count - at);
    for (size_t r = 0; r < row_count; ++r) {
      const auto* row = static_cast<const char*>(rows[r].data);
      if (at + kAhead < count) _mm_prefetch(row + 2 * (at + kAhead), _MM_HINT_T0);
      if (at + kAhead + 32 < count) _mm_prefetch(row + 2 * (at + kAhead + 32), _MM_HINT_T0);
    }
    __m512 acc[kVectors];
    sum_chunk(acc, rows, group_ends, groups, at, n);
    // Narrowed in registers and stored whole: a masked narrowing store (vpmovdw to memory) is
    // several times slower on AMD's Zen 4.
    alignas(32) uint16_t last[kChunk];
    uint16_t* out = n == kChunk ? dst + at : last;
    for (size_t k = 0; k < kVectors; ++k) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16 * k),
                          _mm512_cvtepi32_epi16(round_to_bf16(acc[k])));
    }
    if (n < kChunk) std::memcpy(dst + at, last, n * sizeof(uint16_t));
  }
}

}  // namespace

bool bf16_weighted_group_sum(void* dst, const WeightedRow* rows, const size_t* group_ends,
                             size_t groups, size_t count) {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512) return false;
  const size_t row_count = groups == 0 ? 0 : group_ends[groups - 1];
  for (size_t r = 0; r < row_count; ++r) {
    if (rows[r].dtype != DType::kBF16) return false;
  }
  weighted_group_sum_avx512(static_cast<uint16_t*>(dst), rows, group_ends, groups, count);
  return true;
}
#else
bool bf16_weighted_group_sum(void*, const WeightedRow*, const size_t*, size_t, size_t) {
  return false;
}
#endif

}  // namespace symmesh
