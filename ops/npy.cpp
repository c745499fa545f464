#include "ops/npy.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fstream>

#include "common/errors.h"

namespace symmesh {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr uint64_t kMaxDimension = uint64_t{1} << 32;

size_t descr_size(const std::string& descr) {
  if (descr == "<i8") return 8;
  return descr == "<f4" || descr == "<i4" ? 4 : 2;
}

}  // namespace

NpyArray read_npy(const std::string& path) {
  auto fail = [&](const std::string& why) { throw InvalidArgument(path + ": " + why); };
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open it");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, kMagic, 6) != 0) fail("not a .npy file (magic)");
  uint32_t header_length = 0;
  if (magic[6] == 1) {
    uint8_t bytes[2];
    in.read(reinterpret_cast<char*>(bytes), 2);
    header_length = bytes[0] | (bytes[1] << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    uint8_t bytes[4];
    in.read(reinterpret_cast<char*>(bytes), 4);
    header_length = bytes[0] | (bytes[1] << 8) | (bytes[2] << 16) | (uint32_t(bytes[3]) << 24);
  } else {
    fail("unsupported .npy version " + std::to_string(int(magic[6])));
  }
  if (header_length > 65536) fail("header of " + std::to_string(header_length) + " bytes");
  std::string header(header_length, '\0');
  if (!in.read(header.data(), header_length)) fail("truncated header");

  NpyArray array;
  // The value after `'key':` in the header dict, up to the next top-level comma or brace.
  auto value_of = [&](const std::string& key) {
    const size_t at = header.find("'" + key + "'");
    if (at == std::string::npos) fail("header has no '" + key + "': " + header);
    const size_t colon = header.find(':', at);
    size_t end = colon + 1;
    for (int depth = 0; end < header.size(); ++end) {
      const char c = header[end];
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (depth == 0 && (c == ',' || c == '}')) break;
    }
    std::string value = header.substr(colon + 1, end - colon - 1);
    std::erase_if(value, [](char c) { return c == ' ' || c == '\''; });
    return value;
  };
  array.descr = value_of("descr");
  static const char* kDescrs[] = {"<f4", "<f2", "<u2", "|V2", "<i8", "<i4"};
  if (std::find(std::begin(kDescrs), std::end(kDescrs), array.descr) == std::end(kDescrs)) {
    fail("dtype '" + array.descr + "' is not supported: allowed '<f4' (f32), '<f2' (f16), " +
         "'<u2' or '|V2' (bf16 bit patterns), '<i8' or '<i4' (expert ids)");
  }
  if (value_of("fortran_order") != "False") {
    fail("Fortran order is not supported: save a C-ordered array (np.ascontiguousarray)");
  }
  const std::string shape = value_of("shape");  // "(rows,cols)" or "(rows,cols,)"
  const size_t comma = shape.find(',');
  const bool two_d =
      shape.size() > 2 && shape.front() == '(' && shape.back() == ')' &&
      comma != std::string::npos && shape.find_first_not_of("0123456789,", 1) == shape.size() - 1 &&
      std::count(shape.begin(), shape.end(), ',') == (shape[shape.size() - 2] == ',' ? 2 : 1);
  if (!two_d || comma == 1) fail("shape " + shape + " is not 2-D (rows, cols)");
  const auto dimension = [&](std::string_view digits) {
    uint64_t value = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (error != std::errc() || end == digits.data() || value > kMaxDimension) {
      fail("shape " + shape + ": a dimension is not a number in 0.." +
           std::to_string(kMaxDimension));
    }
    return value;
  };
  const std::string_view dims(shape);
  const uint64_t rows = dimension(dims.substr(1, comma - 1));
  const size_t cols_end = shape.find_first_of(",)", comma + 1);
  const uint64_t cols = dimension(dims.substr(comma + 1, cols_end - comma - 1));
  array.rows = int64_t(rows);
  array.cols = int64_t(cols);
  // The data must be in the file before anything is allocated for it.
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(rows, cols, &bytes) ||
      __builtin_mul_overflow(bytes, uint64_t(descr_size(array.descr)), &bytes)) {
    fail("shape " + shape + " is larger than any file");
  }
  const std::streamoff at = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streamoff file_end = in.tellg();
  in.seekg(at);
  if (at < 0 || file_end < at || bytes > uint64_t(file_end - at)) {
    fail("truncated: the shape needs " + std::to_string(bytes) + " bytes of data, the file has " +
         std::to_string(file_end > at ? file_end - at : 0));
  }
  array.data.resize(bytes);
  if (!in.read(reinterpret_cast<char*>(array.data.data()), std::streamsize(bytes))) {
    fail("truncated: the shape needs " + std::to_string(bytes) + " bytes of data");
  }
  return array;
}

void write_npy(const std::string& path, const std::string& descr, const void* data, int64_t rows,
               int64_t cols) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" +
                       std::to_string(rows) + ", " + std::to_string(cols) + "), }";
  // Magic (6) + version (2) + length (2) + header + newline, padded to 64 bytes.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InvalidArgument(path + ": cannot write it");
  out.write(kMagic, 6);
  const char version[2] = {1, 0};
  out.write(version, 2);
  const char length[2] = {char(header.size() & 0xff), char(header.size() >> 8)};
  out.write(length, 2);
  out.write(header.data(), std::streamsize(header.size()));
  out.write(static_cast<const char*>(data),
            std::streamsize(size_t(rows) * cols * descr_size(descr)));
  if (!out) throw InvalidArgument(path + ": write failed");
}

void write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  write_npy(path, "<f4", data, rows, cols);
}

}  // namespace symmesh
