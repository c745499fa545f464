// A drill's slow PE, for the tests of the straggler figures (wait_by_peer_s, slowest_peer):
// with SYMMESH_DRILL_SLOW_PE=PE:MILLISECONDS in a daemon's environment, that PE sleeps so long
// before each call of a job, so that every other PE waits for it.
#pragma once

#include <string_view>

namespace symmesh {

// Sleeps when the drill names `pe`; throws InvalidArgument naming the variable and its form when
// it is set but malformed.
void drill_before_call(int pe);

struct SlowPeDrill {
  int pe = -1;  // -1: no drill
  int milliseconds = 0;
};
// "PE:MILLISECONDS" (empty: no drill); throws InvalidArgument for anything else.
SlowPeDrill parse_slow_pe_drill(std::string_view text);

}  // namespace symmesh
