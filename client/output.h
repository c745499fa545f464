// How the CLI shows answers: a compact table for people, one JSON object with --json.
#pragma once

#include <string>

#include "jobs.pb.h"

namespace symmesh {

void print_status(const wire::StatusReply& status, bool json);
void print_result(const wire::JobResult& result, bool json);
void print_error_json(const std::string& error);

}  // namespace symmesh
