#include "client/output.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "client/submit/submit_kind.h"
#include "common/errors.h"
#include "common/units.h"
#include "wire/chrome_trace.h"
#include "wire/json.h"

namespace symmesh {

void print_error_json(const std::string& error) {
  std::cout << nlohmann::json{{"status", "error"}, {"error", error}}.dump() << "\n";
}

namespace {

// A straggler's share from which the text names it (below it nobody stands out).
constexpr double kStragglerShare = 0.5;

bool stands_out(const wire::JobResult& result) {
  return result.has_straggler() && result.straggler_share() >= kStragglerShare;
}

// The PEs that stood out as stragglers in the finished jobs the root keeps.
void print_stragglers(const wire::StatusReply& status) {
  std::map<uint32_t, std::vector<uint64_t>> jobs_of;
  size_t finished = 0;
  for (const auto& job : status.jobs()) {
    if (!job.has_result()) continue;
    ++finished;
    if (stands_out(job.result())) jobs_of[job.result().straggler()].push_back(job.job_id());
  }
  for (const auto& [pe, ids] : jobs_of) {
    std::printf("straggler: PE %u in %zu of the last %zu finished jobs (the latest: job %llu)\n",
                pe, ids.size(), finished, static_cast<unsigned long long>(ids.back()));
  }
}

}  // namespace

void print_status(const wire::StatusReply& status, bool json) {
  if (json) {
    std::cout << status_json(status).dump() << "\n";
    return;
  }
  std::printf(
      "node %u of %u: %s, %u ranks per node, heap %s used of %s (last job's peak %s), jobs run "
      "%llu (%llu failed, %u queued)\n",
      status.node_rank(), status.nodes(), wire::enum_text(status.state()).c_str(),
      status.ranks_per_node(), format_bytes(status.heap_used()).c_str(),
      format_bytes(status.heap_size()).c_str(), format_bytes(status.heap_job_peak()).c_str(),
      static_cast<unsigned long long>(status.jobs_run()),
      static_cast<unsigned long long>(status.jobs_failed()), status.jobs_queued());
  const wire::CpuStatus& cpus = status.cpus();
  char quota[48] = "no cgroup quota";
  if (cpus.cgroup_quota() > 0)
    std::snprintf(quota, sizeof(quota), "cgroup quota %.1f", cpus.cgroup_quota());
  std::printf(
      "CPUs: %u%s (affinity %s, %s, %u NUMA node%s); fused operators default to %u "
      "compute + %u comm threads per PE; %s\n",
      cpus.usable(), cpus.from_flag() ? " from --cpus" : "", cpus.allowed().c_str(), quota,
      cpus.numa_nodes(), cpus.numa_nodes() == 1 ? "" : "s", cpus.fused_compute_threads(),
      cpus.fused_comm_threads(), cpus.placement().c_str());
  std::printf("%-5s %-8s %-20s %-22s %-6s %s\n", "NODE", "STATE", "HOST", "CONTROL", "RANKS",
              "STATUS");
  for (const auto& node : status.node()) {
    std::printf("%-5u %-8s %-20s %-22s %-6u %s\n", node.node_rank(),
                wire::enum_text(node.state()).c_str(), node.hostname().c_str(),
                node.control_endpoint().c_str(), node.ranks(),
                node.status_url().empty() ? "off" : node.status_url().c_str());
  }
  for (const auto& node : status.node()) {
    if (node.state() != wire::NODE_STATE_UP) {
      std::printf("node %u is %s: %s\n", node.node_rank(), wire::enum_text(node.state()).c_str(),
                  node.state_reason().c_str());
    }
  }
  print_stragglers(status);
  if (status.peer_size() == 0) return;
  std::printf("%-5s %-9s %-5s %-22s %s\n", "PEER", "TRANSPORT", "UP", "DATA", "WHY");
  for (const auto& peer : status.peer()) {
    std::printf("%-5u %-9s %-5s %-22s %s\n", peer.node_rank(), peer.transport().c_str(),
                peer.up() ? "yes" : "no", peer.data_endpoint().c_str(), peer.reason().c_str());
  }
}

void print_result(const wire::JobResult& result, bool json) {
  if (json) {
    std::cout << job_result_json(result).dump() << "\n";
    return;
  }
  if (!result.ok()) {
    std::fprintf(stderr, "symmesh: job %llu failed: %s\n",
                 static_cast<unsigned long long>(result.job_id()), result.error().c_str());
    return;
  }
  const std::vector<SubmitKind> kinds = submit_kinds();
  const auto known = std::find_if(kinds.begin(), kinds.end(), [&](const SubmitKind& kind) {
    return kind.name == wire::enum_text(result.kind()) && kind.print;
  });
  if (known != kinds.end()) {
    known->print(result);
  } else {  // a kind this CLI does not know (a newer daemon's): its figures are in --json
    std::printf("job %llu  %s  %u PEs  %u iters  median %.3f ms%s\n",
                static_cast<unsigned long long>(result.job_id()),
                wire::enum_text(result.kind()).c_str(), result.pes(), result.iters(),
                result.median_s() * 1e3, verification(result).c_str());
  }
  // A PE that stands out: it hardly waited while the others waited for it.
  if (stands_out(result)) {
    std::printf("  straggler   PE %u: blocked %.3f s, %.0f%% less than the other PEs' mean\n",
                result.straggler(), result.blocked_s(int(result.straggler())),
                result.straggler_share() * 100);
  }
}

namespace {

std::string local_time(double unix_s) {
  if (unix_s <= 0) return "-";
  const std::time_t seconds = std::time_t(unix_s);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm);
  return text;
}

std::string ran_for(const wire::JobRecord& job) {
  if (job.started_unix_s() <= 0) return "-";
  const double end =
      job.finished_unix_s() > 0
          ? job.finished_unix_s()
          : std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f s", end - job.started_unix_s());
  return text;
}

// The result in a few words: the error, or the median and the verification.
std::string summary(const wire::JobRecord& job) {
  if (!job.has_result()) return "";
  const wire::JobResult& r = job.result();
  if (!r.ok()) return r.error();
  char text[128];
  std::snprintf(text, sizeof(text), "median %.3f ms%s%s", r.median_s() * 1e3,
                r.verify_requested() ? (r.verified() ? ", verified" : ", NOT VERIFIED") : "",
                stands_out(r) ? (", straggler PE " + std::to_string(r.straggler())).c_str() : "");
  return text;
}

}  // namespace

void print_jobs(const std::vector<wire::JobRecord>& jobs, bool json) {
  if (json) {
    nlohmann::json out{{"status", "ok"}, {"jobs", nlohmann::json::array()}};
    for (const auto& job : jobs) out["jobs"].push_back(job_record_json(job));
    std::cout << out.dump() << "\n";
    return;
  }
  std::printf("%-6s %-11s %-10s %-19s %-10s %s\n", "ID", "KIND", "STATE", "SUBMITTED", "RAN",
              "RESULT");
  for (const auto& job : jobs) {
    std::printf("%-6llu %-11s %-10s %-19s %-10s %s\n",
                static_cast<unsigned long long>(job.job_id()), wire::enum_text(job.kind()).c_str(),
                wire::enum_text(job.state()).c_str(), local_time(job.submitted_unix_s()).c_str(),
                ran_for(job).c_str(), summary(job).c_str());
  }
}

void print_job(const wire::JobRecord& job, bool json, const std::string& trace_file) {
  size_t spans = 0;
  uint64_t dropped = 0;
  if (!trace_file.empty()) {
    for (const auto& thread : job.trace().thread()) {
      spans += size_t(thread.span_size());
      dropped += thread.dropped();
    }
    std::ofstream file(trace_file);
    file << chrome_trace_json(job).dump() << "\n";
    if (!file.flush()) {
      throw Error("cannot write the trace to '" + trace_file + "': " + std::strerror(errno));
    }
  }
  if (json) {
    nlohmann::json out = job_record_json(job);
    out["status"] = "ok";
    if (!trace_file.empty()) {
      out["trace_file"] = trace_file;
      out["trace_spans"] = spans;
      out["trace_dropped_spans"] = dropped;
    }
    std::cout << out.dump() << "\n";
    return;
  }
  std::printf("job %llu  %s  %s  submitted %s, started %s, ran %s\n",
              static_cast<unsigned long long>(job.job_id()), wire::enum_text(job.kind()).c_str(),
              wire::enum_text(job.state()).c_str(), local_time(job.submitted_unix_s()).c_str(),
              local_time(job.started_unix_s()).c_str(), ran_for(job).c_str());
  if (job.has_result() && job.result().ok()) print_result(job.result(), false);
  if (job.has_result() && !job.result().ok())
    std::printf("  error: %s\n", job.result().error().c_str());
  if (!trace_file.empty()) {
    std::printf(
        "  trace: %zu spans written to %s (Chrome trace-event JSON: open it in "
        "https://ui.perfetto.dev or chrome://tracing)%s\n",
        spans, trace_file.c_str(),
        dropped ? (", " + std::to_string(dropped) + " spans dropped (buffers full)").c_str() : "");
  }
}

}  // namespace symmesh
