// A session's one-sided calls (kGet, kPutSignal): bytes between this PE's heap and another PE's
// at symmetric offsets, with a word set on that PE once they moved. Attached processes build
// point-to-point messages on them (a sender announces a message with a put_signal, the receiver
// takes it with a get that tells the sender when it is done), so neither call waits for the
// other PE's process: only for the wire, within the transport's deadline.
#pragma once

#include <cstdint>
#include <map>

#include "api/request_ring.h"
#include "runtime/pe.h"

namespace symmesh {

// What this process's malloc answered and it has not freed: heap offset -> bytes.
using Allocations = std::map<uint64_t, uint64_t>;

// Throws InvalidArgument naming the field when a PE is out of range, or when the source, the
// destination or the signal word does not lie inside one of `allocations` (so a process names
// only what it allocated, never the daemon's own regions on any PE; the heap is symmetric, so
// the same offsets are the peer's allocations too).
void run_session_one_sided(Pe& pe, const attach::Request& request, const Allocations& allocations);

}  // namespace symmesh
