// A strict reader of Chrome trace-event JSON for the tests: what Perfetto and chrome://tracing
// need of a job trace, checked so that a malformed trace fails a test.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace symmesh::testing {

// "" when `trace` is valid, else the first problem: a traceEvents array; every complete ("X")
// event with a string name and cat, numeric ts and dur >= 0, integer pid and tid; ts
// non-decreasing on each (pid, tid) track; a process_name for every pid and a thread_name for
// every track that has events.
std::string chrome_trace_problem(const nlohmann::json& trace);

}  // namespace symmesh::testing
