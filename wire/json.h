// The JSON forms of the wire messages people read: a job's result (what `symmesh submit ...
// --json` prints and what GET /status lists) and a daemon's status (`symmesh status --json` and
// GET /status). One form each, so the CLI and the HTTP endpoint never drift apart.
#pragma once

#include <nlohmann/json.hpp>

#include "wire/jobs.pb.h"

namespace symmesh {

nlohmann::json job_result_json(const wire::JobResult& result);
// A job as the root keeps it: state, times, and its result (null until it finished).
nlohmann::json job_record_json(const wire::JobRecord& job);
// With the root's jobs (queued, running, the last 50 finished with their results).
nlohmann::json status_json(const wire::StatusReply& status);

}  // namespace symmesh
