// Where a low-latency MoE dispatch puts the rows it received when its caller says: a session
// puts them straight into the process's staging area, not into the dispatch's own storage and
// then there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

namespace symmesh {

// Called once, on the calling thread, with the count of rows received (maybe 0: then the pointer
// is not used), after the dispatch's own x has been read; returns room for received x hidden
// elements of the dispatch's type, and must not wait for other PEs.
using PlaceReceivedX = std::function<std::byte*(int64_t received)>;

}  // namespace symmesh
