// How the CLI shows answers: a compact table for people, one JSON object with --json.
#pragma once

#include <string>
#include <vector>

#include "wire/jobs.pb.h"

namespace symmesh {

void print_status(const wire::StatusReply& status, bool json);
void print_result(const wire::JobResult& result, bool json);
void print_error_json(const std::string& error);
// One line per job; --json: {"status": "ok", "jobs": [...]}.
void print_jobs(const std::vector<wire::JobRecord>& jobs, bool json);
// One job: its state and times, then its result as `submit` prints it. With a trace_file, the
// job's trace is written there as Chrome trace-event JSON first (and the file named).
void print_job(const wire::JobRecord& job, bool json, const std::string& trace_file = "");

}  // namespace symmesh
