// libFuzzer: sizes, durations and counts as people write them (--heap-size 1GiB,
// --wait-timeout 60s, --nodes 4).
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/errors.h"
#include "common/units.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    symmesh::format_bytes(symmesh::parse_size(text, "--size"));
  } catch (const symmesh::Error&) {
  }
  try {
    symmesh::parse_duration(text, "--duration");
  } catch (const symmesh::Error&) {
  }
  try {
    symmesh::parse_count(text, "--count", 1, 512);
  } catch (const symmesh::Error&) {
  }
  return 0;
}
