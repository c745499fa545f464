// Where a job's operands come from: generated from a seed (the default), or read from a
// directory of .npy files that every daemon reads on its own host. load_matrix() reads one
// such file, checking its shape and dtype and naming it in every error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/collectives/dtype.h"

namespace symmesh {

struct InputSpec {
  uint64_t seed = 1;
  std::string dir;  // empty: generated from the seed
};

// A rows x cols matrix in `dtype`: a file of that dtype ('<f4', '<f2', bf16 as '<u2' / '|V2'),
// or an f32 file rounded to it.
std::vector<std::byte> load_matrix(const std::string& path, int64_t rows, int64_t cols,
                                   DType dtype);

}  // namespace symmesh
