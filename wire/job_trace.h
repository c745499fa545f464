// A traced job's spans on one node, as the node reports them to the root.
#pragma once

#include <cstddef>

#include "common/trace.h"
#include "wire/jobs.pb.h"

namespace symmesh {

// What a whole traced job may bring back, all nodes together: it must fit one control frame
// (4 MiB) to the root and one to the client; a span takes about 30 bytes on the wire.
inline constexpr size_t kTraceSpansPerJob = 65536;

// The recorder's threads as tracks, one per (PE, thread name), with Unix times, within
// `budget` spans: the budget is shared out so that a track with few spans keeps them all; a
// track over its share keeps its earliest spans and counts the rest as dropped.
wire::JobTrace job_trace_to_wire(const trace::Recorder& recorder, int node_rank, size_t budget);

}  // namespace symmesh
