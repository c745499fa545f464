// .npy files: what we write NumPy's header rules accept (64-byte aligned), a round trip, and
// the errors for files that are not what the job needs.
#include "ops/npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "transport/errors.h"

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
