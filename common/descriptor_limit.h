// The process's open-file limit: a server holding many connections (the status endpoint caps
// them at a few thousand) needs more than the common soft default of 1024.
#pragma once

#include <cstdint>

namespace symmesh {

// Raises the soft RLIMIT_NOFILE to the hard one; the soft limit now in force.
uint64_t raise_descriptor_limit();

}  // namespace symmesh
