#include "transport/segment_ops.h"

namespace symmesh {

std::string check_range(uint64_t offset, uint64_t length, size_t segment_size, bool word) {
  if (!in_bounds(offset, length, segment_size)) {
    return "range [" + std::to_string(offset) + ", +" + std::to_string(length) +
           ") is outside the segment of " + std::to_string(segment_size) + " bytes";
  }
  if (word && (offset % 8 != 0 || length != 8)) {
    return "word at offset " + std::to_string(offset) + " is not an 8-byte aligned 64-bit word";
  }
  return {};
}

}  // namespace symmesh
