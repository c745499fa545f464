// A member's own values in a reduction: the element-wise reduction, in order, of one or more
// inputs of one dtype (a PE's input, or every input of its node read through shared memory).
// A ring reads them where they are when it needs them instead of first copying them into its
// accumulator: the block a member sends first is computed chunk by chunk into a buffer of one
// ring chunk (256 KiB, which stays in the core's L2 cache), or sent straight from an f32
// input; every block it receives is written once, as its own values combined with the partial
// sum arriving, in one pass. That saves a pass over the vector and keeps the arithmetic, hence
// the bits, what an eager copy gave.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/collectives/dtype.h"
#include "runtime/collectives/ring.h"

namespace symmesh {

class Contribution {
 public:
  // `inputs` all hold the same elements (index 0 at the pointer), in `dtype`.
  Contribution(std::vector<const std::byte*> inputs, DType dtype, ReduceOp op);

  ReduceOp op() const { return op_; }
  // out[0, range.count) = the values of range: inputs[0] (op) inputs[1] (op) ... out may be
  // one of the inputs (an all-reduce in place).
  void load(Range range, float* out) const;
  // acc[0, range.count) = (the values of range) (op) partial[0, range.count). acc may be where
  // find(range) points.
  void add(Range range, const float* partial, float* acc) const;
  // Where the values of range are stored as f32 (a single f32 input), else nullptr.
  const float* find(Range range) const;

 private:
  static constexpr size_t kBlock = 1024;  // f32 values: 4 KiB, stays in L1

  const std::byte* at(size_t input, size_t element) const;
  bool is_input(Range range, const float* out) const;
  void reduce_inputs(Range range, float* out) const;

  std::vector<const std::byte*> inputs_;
  DType dtype_;
  ReduceOp op_;
};

}  // namespace symmesh
