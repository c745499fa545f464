// .npy files: what we write NumPy's header rules accept (64-byte aligned), a round trip, and
// the errors for files that are not what the job needs.
#include "ops/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/errors.h"

namespace symmesh {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("symmesh-npy-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

TEST(Npy, RoundTripKeepsShapeAndBitsWithAnAlignedHeader) {
  const std::string path = temp_path("round.npy");
  std::vector<float> values{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
  write_npy_f32(path, values.data(), 2, 3);
  EXPECT_EQ(std::filesystem::file_size(path) % 64, 24u % 64);  // 64-byte header + 24 bytes
  const NpyArray array = read_npy(path);
  EXPECT_EQ(array.descr, "<f4");
  EXPECT_EQ(array.rows, 2);
  EXPECT_EQ(array.cols, 3);
  ASSERT_EQ(array.data.size(), values.size() * 4);
  EXPECT_EQ(std::memcmp(array.data.data(), values.data(), array.data.size()), 0);
  std::filesystem::remove(path);
}

// A version 1.0 file with `header` as it is (NumPy pads it; the reader must not care).
void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char length[2] = {char(header.size() & 0xff), char(header.size() >> 8)};
  out.write(length, 2);
  out << header;
  out << std::string(data_bytes, '\0');
}

TEST(Npy, ReadsHeadersAsNumPyWritesThemAndRefusesOtherLayouts) {
  const std::string path = temp_path("raw.npy");
  write_raw(path, "{'descr': '<f2', 'fortran_order': False, 'shape': (3, 2), }\n", 12);
  const NpyArray array = read_npy(path);
  EXPECT_EQ(array.descr, "<f2");
  EXPECT_EQ(array.rows, 3);
  EXPECT_EQ(array.cols, 2);
  for (const char* bad :
       {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 2, 2), }",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }",
        // Found by the fuzzer: a dimension that is no number, and one so
        // large that allocating for it before reading would end the daemon.
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 2), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000), }"}) {
    write_raw(path, bad, 64);
    EXPECT_THROW(read_npy(path), InvalidArgument) << bad;
  }
  std::filesystem::remove(path);
}

TEST(Npy, RefusesWhatItCannotRead) {
  const std::string path = temp_path("bad.npy");
  { std::ofstream(path) << "not numpy"; }
  EXPECT_THROW(read_npy(path), InvalidArgument);
  std::vector<double> doubles(4);
  write_npy(path, "<f4", doubles.data(), 1, 2);
  // A truncated file: the shape claims more than is there.
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  try {
    read_npy(path);
    FAIL() << "truncated file accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos) << e.what();
  }
  write_npy(path, "<u2", doubles.data(), 2, 2);
  EXPECT_EQ(read_npy(path).descr, "<u2");
  EXPECT_THROW(read_npy(temp_path("missing.npy")), InvalidArgument);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace symmesh
