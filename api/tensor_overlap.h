// A MoE call's output must lie apart from its input on the heap: node peers read the input
// (tokens being sent, rows lent) while the output is written. The process's library checks it
// before it sends, and the daemon again, as it trusts nothing the ring holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "api/request_ring.h"
#include "common/errors.h"

namespace symmesh::attach {

// Throws InvalidArgument naming `call`'s `output` and `input` when the input (`input_bytes` at
// src) and the output (`output_bytes` at dst) both lie on the heap and overlap. Offsets are
// checked first (the sums cannot wrap).
inline void check_apart(const Request& r, uint64_t input_bytes, uint64_t output_bytes,
                        std::string_view call, std::string_view input, std::string_view output) {
  if (r.input_place != Place::kHeap || r.output_place != Place::kHeap) return;
  if (r.src >= r.dst + output_bytes || r.dst >= r.src + input_bytes) return;
  const std::string of = std::string(call) + "'s ";
  throw InvalidArgument(of + std::string(output) + " at heap offset " + std::to_string(r.dst) +
                        " (" + std::to_string(output_bytes) + " bytes) overlaps " + of +
                        std::string(input) + " at " + std::to_string(r.src) + " (" +
                        std::to_string(input_bytes) +
                        " bytes): allowed separate tensors, as node peers read the input while "
                        "the output is written");
}

}  // namespace symmesh::attach
