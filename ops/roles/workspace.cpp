#include "ops/roles/workspace.h"

#include <algorithm>
#include <cstring>

#include "common/units.h"
#include "runtime/heap_allocator.h"

namespace symmesh {

void* symmetric_region(Pe& pe, size_t bytes, const std::string& what, const std::string& shrink) {
  try {
    return pe.malloc(std::max<size_t>(bytes, 8));
  } catch (const HeapExhausted& error) {
    // The allocator's message names the PE and says to raise --heap-size; this one leads.
    std::string why = error.what();
    if (why.starts_with("PE ")) why = why.substr(why.find(": ") + 2);
    throw HeapExhausted(pe_error(pe.my_pe(), what + " needs " + format_bytes(bytes) +
                                                 " of symmetric heap: " + why + ", or shrink " +
                                                 shrink));
  }
}

void* symmetric_zeroed(Pe& pe, size_t bytes, const std::string& what, const std::string& shrink) {
  void* address = symmetric_region(pe, bytes, what, shrink);
  std::memset(address, 0, std::max<size_t>(bytes, 8));
  return address;
}

}  // namespace symmesh
