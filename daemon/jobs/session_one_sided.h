// A session's one-sided calls (kGet, kPutSignal): bytes between this PE's heap and another PE's
// at symmetric offsets, with a word set on that PE once they moved. Attached processes build
// point-to-point messages on them (a sender announces a message with a put_signal, the receiver
// takes it with a get that tells the sender when it is done), so neither call waits for the
// other PE's process: only for the wire, within the transport's deadline.
#pragma once

#include "api/request_ring.h"
#include "runtime/pe.h"

namespace symmesh {

// Throws InvalidArgument naming the field when a PE, an offset or a length is out of range.
void run_session_one_sided(Pe& pe, const attach::Request& request);

}  // namespace symmesh
