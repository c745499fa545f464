// NumPy .npy files (format version 1.0 and 2.0): a 2-D little-endian array in C order. Debian
// packages no C++ reader for them, and the header is one Python dict literal, so this is ours.
// dtypes: '<f4' (f32), '<f2' (f16), bf16 as its 16-bit patterns ('<u2' or '|V2', what
// ml_dtypes' bfloat16 saves as), and '<i8' / '<i4' (expert ids).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace symmesh {

struct NpyArray {
  std::string descr;  // '<f4', '<f2', '<u2', '|V2', '<i8', '<i4'
  int64_t rows = 0, cols = 0;
  std::vector<std::byte> data;
};

// Throws InvalidArgument naming the file and what was wrong (not .npy, Fortran order, not 2-D,
// truncated).
NpyArray read_npy(const std::string& path);
void write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols);
void write_npy(const std::string& path, const std::string& descr, const void* data, int64_t rows,
               int64_t cols);

}  // namespace symmesh
