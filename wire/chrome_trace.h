// A traced job as Chrome trace-event JSON (the format Perfetto and chrome://tracing open):
// one process per PE, one thread per track, a complete ("X") event per span with ts and dur
// in microseconds from the job's first span. What `symmesh job ID --trace FILE` writes and
// what the dashboard draws (GET /jobs/ID/trace).
#pragma once

#include <nlohmann/json.hpp>

#include "wire/jobs.pb.h"

namespace symmesh {

nlohmann::json chrome_trace_json(const wire::JobRecord& job);

}  // namespace symmesh
