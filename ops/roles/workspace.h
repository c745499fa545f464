// An operator's symmetric workspace, allocated collectively (every PE, the same order).
#pragma once

#include <cstddef>
#include <string>

#include "runtime/pe.h"

namespace symmesh {

// Symmetric memory, not cleared: for data a reader only reads where a signal says it was
// written. When the heap is too small, the HeapExhausted names `what`, its size, and what to
// shrink (`shrink`, e.g. the operator's tiles) instead of raising --heap-size.
void* symmetric_region(Pe& pe, size_t bytes, const std::string& what, const std::string& shrink);
// The same, zeroed: for counters, tails and flags.
void* symmetric_zeroed(Pe& pe, size_t bytes, const std::string& what, const std::string& shrink);

}  // namespace symmesh
