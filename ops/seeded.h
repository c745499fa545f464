// Stateless seeded values for generated inputs: any PE can make any PE's matrix, tokens or
// routing from (seed, stream, index) alone, which is how references need no communication.
#pragma once

#include <cstdint>

namespace symmesh {

// splitmix64: a well-mixed 64-bit value per input.
inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) from 64 random bits.
inline double unit_interval(uint64_t bits) {
  return double(bits >> 11) * 0x1.0p-53;
}

// Uniform in [-1, 1) on a grid of 2^-23, from 64 random bits.
inline float plus_minus_one(uint64_t bits) {
  return float(int64_t(bits >> 40) - (int64_t{1} << 23)) / float(1 << 23);
}

}  // namespace symmesh
