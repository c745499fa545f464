// Where a call's tensors sit in a PE's staging area (api/request_ring.h), computed the same way
// by the process that writes them and the daemon that reads them: each tensor starts on a
// 64-byte boundary, in the order listed. A call's outputs overwrite its inputs only where the
// daemon has read them first.
#pragma once

#include <cstddef>
#include <cstdint>

namespace symmesh::attach {

inline constexpr uint64_t align64(uint64_t bytes) {
  return (bytes + 63) / 64 * 64;
}

// A dispatch's inputs (`tokens` of them) and, from the start again, its outputs (`received`):
// x [tokens][hidden], topk_idx [tokens][topk] int32, topk_weights [tokens][topk] f32.
struct TokenBlock {
  uint64_t x = 0, idx = 0, weights = 0, end = 0;
};
inline constexpr TokenBlock token_block(uint64_t tokens, uint64_t hidden, uint64_t topk,
                                        uint64_t element) {
  TokenBlock b;
  b.idx = align64(tokens * hidden * element);
  b.weights = b.idx + align64(tokens * topk * 4);
  b.end = b.weights + align64(tokens * topk * 4);
  return b;
}

// A combine: rows [received][hidden] (this PE's output per received token), bias
// [tokens][hidden] when it has one, and the result [tokens][hidden].
struct CombineBlock {
  uint64_t rows = 0, bias = 0, out = 0, end = 0;
};
inline constexpr CombineBlock combine_block(uint64_t received, uint64_t tokens, uint64_t hidden,
                                            bool bias, uint64_t element) {
  CombineBlock b;
  b.bias = align64(received * hidden * element);
  b.out = b.bias + (bias ? align64(tokens * hidden * element) : 0);
  b.end = b.out + align64(tokens * hidden * element);
  return b;
}

// What a low-latency dispatch delivers: x [received][hidden], packed by local expert, and
// counts [local experts] int64 (expert e's rows follow those of experts 0..e-1). Its inputs are
// a dispatch's (token_block); its combine's rows and output are a combine's with no bias.
struct LowLatencyBlock {
  uint64_t x = 0, counts = 0, end = 0;
};
inline constexpr LowLatencyBlock low_latency_block(uint64_t received, uint64_t hidden,
                                                   uint64_t local_experts, uint64_t element) {
  LowLatencyBlock b;
  b.counts = align64(received * hidden * element);
  b.end = b.counts + align64(local_experts * 8);
  return b;
}

// A fused op: a [a_rows][k], b [k][n], the result c [c_rows][n] and, for all_gather_matmul,
// the gathered A [c_rows][k], all in the call's element type.
struct FusedBlock {
  uint64_t a = 0, b = 0, c = 0, gathered = 0, end = 0;
};
inline constexpr FusedBlock fused_block(uint64_t a_rows, uint64_t c_rows, uint64_t n, uint64_t k,
                                        bool gathered, uint64_t element) {
  FusedBlock f;
  f.b = align64(a_rows * k * element);
  f.c = f.b + align64(k * n * element);
  f.gathered = f.c + align64(c_rows * n * element);
  f.end = f.gathered + (gathered ? align64(c_rows * k * element) : 0);
  return f;
}

}  // namespace symmesh::attach
