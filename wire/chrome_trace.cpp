#include "wire/chrome_trace.h"

#include <algorithm>
#include <limits>
#include <map>

#include "wire/enum_text.h"

namespace symmesh {
namespace {

nlohmann::json metadata(const char* what, uint32_t pid, uint32_t tid, const nlohmann::json& args) {
  return {{"name", what}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", args}};
}

}  // namespace

nlohmann::json chrome_trace_json(const wire::JobRecord& job) {
  int64_t origin = std::numeric_limits<int64_t>::max();
  uint64_t dropped = 0;
  for (const auto& thread : job.trace().thread()) {
    for (const auto& span : thread.span()) origin = std::min(origin, span.start_unix_ns());
    dropped += thread.dropped();
  }
  nlohmann::json events = nlohmann::json::array();
  std::map<uint32_t, uint32_t> tracks_of_pe;
  for (const auto& thread : job.trace().thread()) {
    const uint32_t pid = thread.pe();
    const uint32_t tid = tracks_of_pe[pid]++;
    if (tid == 0) {
      events.push_back(metadata("process_name", pid, 0,
                                {{"name", "PE " + std::to_string(pid) + " (node " +
                                              std::to_string(thread.node_rank()) + ")"}}));
      events.push_back(metadata("process_sort_index", pid, 0, {{"sort_index", pid}}));
    }
    events.push_back(metadata("thread_name", pid, tid, {{"name", thread.name()}}));
    events.push_back(metadata("thread_sort_index", pid, tid, {{"sort_index", tid}}));
    for (const auto& span : thread.span()) {
      nlohmann::json event = {{"name", span.name()},
                              {"cat", span.category()},
                              {"ph", "X"},
                              {"ts", double(span.start_unix_ns() - origin) / 1e3},
                              {"dur", double(span.duration_ns()) / 1e3},
                              {"pid", pid},
                              {"tid", tid}};
      // A wait names the PE it waited for, as the job result's wait_by_peer_s counts it.
      if (span.has_peer()) event["args"] = {{"peer", span.peer()}};
      events.push_back(std::move(event));
    }
  }
  return {{"traceEvents", std::move(events)},
          {"displayTimeUnit", "ms"},
          {"otherData",
           {{"job_id", job.job_id()},
            {"kind", wire::enum_text(job.kind())},
            {"state", wire::enum_text(job.state())},
            {"start_unix_ns", origin == std::numeric_limits<int64_t>::max() ? 0 : origin},
            {"dropped_spans", dropped}}}};
}

}  // namespace symmesh
