#include "tests/common/chrome_trace_check.h"

#include <map>
#include <set>

namespace symmesh::testing {

std::string chrome_trace_problem(const nlohmann::json& trace) {
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
    return "no traceEvents array";
  }
  std::set<int64_t> named_processes;
  std::set<std::pair<int64_t, int64_t>> named_threads, used_threads;
  std::map<std::pair<int64_t, int64_t>, double> last_ts;
  size_t index = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string at = "event " + std::to_string(index++) + " " + e.dump();
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) return at + ": no ph";
    for (const char* key : {"pid", "tid"}) {
      if (!e.contains(key) || !e[key].is_number_integer()) return at + ": no integer " + key;
    }
    const std::pair<int64_t, int64_t> track{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()};
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (e.value("name", "") == "process_name") named_processes.insert(track.first);
      if (e.value("name", "") == "thread_name") named_threads.insert(track);
      continue;
    }
    if (ph != "X") return at + ": ph is not X or M";
    for (const char* key : {"name", "cat"}) {
      if (!e.contains(key) || !e[key].is_string()) return at + ": no string " + key;
    }
    for (const char* key : {"ts", "dur"}) {
      if (!e.contains(key) || !e[key].is_number()) return at + ": no numeric " + key;
    }
    const double ts = e["ts"], dur = e["dur"];
    if (ts < 0 || dur < 0) return at + ": negative ts or dur";
    const auto last = last_ts.find(track);
    if (last != last_ts.end() && ts < last->second) return at + ": ts goes back on its track";
    last_ts[track] = ts;
    used_threads.insert(track);
  }
  for (const auto& track : used_threads) {
    if (!named_processes.count(track.first)) {
      return "pid " + std::to_string(track.first) + " has no process_name";
    }
    if (!named_threads.count(track)) {
      return "track " + std::to_string(track.first) + "/" + std::to_string(track.second) +
             " has no thread_name";
    }
  }
  return "";
}

}  // namespace symmesh::testing
