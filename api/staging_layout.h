// Where a call's tensors sit in a PE's staging area (api/request_ring.h), computed the same way
// by the process that writes them and the daemon that reads them: each tensor starts on a
// 64-byte boundary, in the order listed, within its block (the call's inputs, or its outputs).
// The blocks are placed by the request (Request::stage_at, stage_room, spill_at).
#pragma once

#include <cstddef>
#include <cstdint>

#include "api/request_ring.h"

namespace symmesh::attach {

inline constexpr uint64_t align64(uint64_t bytes) {
  return (bytes + 63) / 64 * 64;
}

// Where the request `r` puts a call's outputs, `out_end` bytes after an input block of
// `in_end`: right after the inputs when both fit in its stage_room, else at its spill_at. The
// caller checks the range (the daemon: inside the area and apart from the inputs).
inline constexpr uint64_t staged_outputs_at(const Request& r, uint64_t in_end, uint64_t out_end) {
  const uint64_t after = align64(in_end);
  return after <= r.stage_room && out_end <= r.stage_room - after ? r.stage_at + after : r.spill_at;
}

// A dispatch's inputs (`tokens` of them), and in its own block its outputs (`received`):
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

// A combine's inputs: rows [received][hidden] (this PE's output per received token) and bias
// [tokens][hidden] when it has one. Its output, the result [tokens][hidden], is the outputs'
// block.
struct CombineBlock {
  uint64_t rows = 0, bias = 0, end = 0;
};
inline constexpr CombineBlock combine_block(uint64_t received, uint64_t tokens, uint64_t hidden,
                                            bool bias, uint64_t element) {
  CombineBlock b;
  b.bias = align64(received * hidden * element);
  b.end = b.bias + (bias ? align64(tokens * hidden * element) : 0);
  return b;
}

// What a low-latency dispatch delivers: x [received][hidden], packed by local expert, and
// counts [local experts] int64 (expert e's rows follow those of experts 0..e-1): the outputs'
// block. Its inputs are a dispatch's (token_block); its combine's are a combine's with no bias.
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
