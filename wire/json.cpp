#include "wire/json.h"

#include "wire/enum_text.h"

namespace symmesh {
namespace {

void add_matmul_json(const wire::JobResult& result, nlohmann::json& out) {
  const wire::MatmulFigures& f = result.matmul();
  const nlohmann::json absent;  // null: a figure the mode did not measure
  out["op"] = result.op();
  out["dtype"] = result.dtype();
  out["mode"] = wire::enum_text(f.mode());
  out["chosen"] = wire::enum_text(f.chosen());  // whose time and output are the job's
  out["planned"] = f.mode() == wire::MATMUL_MODE_AUTO ? nlohmann::json(f.planned()) : absent;
  out["transfer"] = wire::enum_text(f.transfer());
  if (!result.verify_requested()) {
    out["verified"] = absent;
    out["max_abs_err"] = absent;
  }
  out["max_rel_err"] = result.verify_requested() ? nlohmann::json(f.max_rel_err()) : absent;
  out["tolerance"] = result.verify_requested() ? nlohmann::json(f.tolerance()) : absent;
  out["deterministic"] = f.deterministic();
  out["compute_s"] = f.compute_s();
  out["compute_threads"] = f.compute_threads();
  out["comm_threads"] = f.comm_threads();
  out["comm_s"] = f.comm_s();
  out["comm_cpu_s"] = f.comm_cpu_s();
  out["sequential_s"] = f.sequential_s();
  const bool fused = f.pipelined();
  out["pipelined_s"] = fused ? nlohmann::json(f.pipelined_s()) : absent;
  out["speedup"] = fused ? nlohmann::json(f.speedup()) : absent;
  out["time_saved_s"] = fused ? nlohmann::json(f.time_saved_s()) : absent;
  out["overlap_efficiency"] = fused ? nlohmann::json(f.overlap_efficiency()) : absent;
  out["fused_compute_s"] = fused ? nlohmann::json(f.fused_compute_s()) : absent;
  out["compute_slowdown"] = fused ? nlohmann::json(f.compute_slowdown()) : absent;
  out["fused_gemm_gflops"] = fused ? nlohmann::json(f.fused_gemm_gflops()) : absent;
  out["gflops"] = f.gflops();
  out["compute_gflops"] = f.compute_gflops();
  out["wire_gbps"] = f.wire_gbps();
  out["wire_bytes"] = f.wire_bytes();
  out["gemm_path"] = f.gemm_path();
}

}  // namespace

nlohmann::json job_result_json(const wire::JobResult& result) {
  nlohmann::json out{{"status", result.ok() ? "ok" : "error"}};
  if (!result.ok()) out["error"] = result.error();
  if (result.job_id()) out["job_id"] = result.job_id();
  if (result.kind() != wire::JOB_KIND_UNSPECIFIED) {
    out["kind"] = wire::enum_text(result.kind());
    out["algo"] = result.algo();
    out["iters"] = result.iters();
    out["pes"] = result.pes();
    out["nodes"] = result.nodes();
    out["median_s"] = result.median_s();
    out["p50_us"] = result.p50_us();
    out["p99_us"] = result.p99_us();
  }
  if (result.kind() == wire::JOB_KIND_TRANSPORT) {
    out["op"] = result.op();
    out["bytes"] = result.bytes();
    out["transport"] = result.transport();
    out["gbps"] = result.algbw_gbps();
  }
  if (result.kind() == wire::JOB_KIND_COLLECTIVE) {
    out["op"] = result.op();
    out["dtype"] = result.dtype();
    out["bytes"] = result.bytes();
    out["algbw_gbps"] = result.algbw_gbps();
    out["busbw_gbps"] = result.busbw_gbps();
  }
  if (result.verify_requested()) {
    out["verified"] = result.verified();
    out["max_abs_err"] = result.max_abs_err();
  }
  if (result.kind() == wire::JOB_KIND_MATMUL) add_matmul_json(result, out);
  if (result.kind() == wire::JOB_KIND_DISPATCH || result.kind() == wire::JOB_KIND_COMBINE) {
    const wire::MoeFigures& f = result.moe();
    out["tolerance"] = f.tolerance();
    out["deterministic"] = f.deterministic();
    out["tokens_per_s"] = f.tokens_per_s();
    out["algbw_gbps"] = f.algbw_gbps();
    out["inter_node_bytes"] = f.inter_node_bytes();
    out["intra_node_bytes"] = f.intra_node_bytes();
    out["flat_inter_node_bytes"] = f.flat_inter_node_bytes();
  }
  return out;
}

nlohmann::json job_record_json(const wire::JobRecord& job) {
  nlohmann::json record{{"job_id", job.job_id()},
                        {"kind", wire::enum_text(job.kind())},
                        {"state", wire::enum_text(job.state())},
                        {"submitted_unix_s", job.submitted_unix_s()},
                        {"started_unix_s", job.started_unix_s()},
                        {"finished_unix_s", job.finished_unix_s()},
                        {"traced", job.traced()}};
  record["result"] = job.has_result() ? job_result_json(job.result()) : nlohmann::json();
  return record;
}

nlohmann::json status_json(const wire::StatusReply& status) {
  nlohmann::json out{{"status", "ok"},
                     {"node_rank", status.node_rank()},
                     {"nodes", status.nodes()},
                     {"ranks_per_node", status.ranks_per_node()},
                     {"state", wire::enum_text(status.state())},
                     {"heap_size", status.heap_size()},
                     {"heap_used", status.heap_used()},
                     {"heap_job_peak", status.heap_job_peak()},
                     {"jobs_run", status.jobs_run()},
                     {"jobs_failed", status.jobs_failed()},
                     {"jobs_queued", status.jobs_queued()},
                     {"version", status.version()},
                     {"uptime_s", status.uptime_s()},
                     {"status_url", status.status_url()},
                     {"incarnation", status.incarnation()},
                     {"epoch", status.epoch()},
                     {"attach_socket", status.attach_socket()},
                     {"attached_pids", status.attached_pids()},
                     {"processes_taken", status.processes_taken()}};
  const wire::CpuStatus& cpus = status.cpus();
  out["cpus"] = {{"usable", cpus.usable()},
                 {"allowed", cpus.allowed()},
                 {"cgroup_quota", cpus.cgroup_quota()},
                 {"numa_nodes", cpus.numa_nodes()},
                 {"from_flag", cpus.from_flag()},
                 {"fused_compute_threads", cpus.fused_compute_threads()},
                 {"fused_comm_threads", cpus.fused_comm_threads()},
                 {"placement", cpus.placement()}};
  out["cluster"] = nlohmann::json::array();
  for (const auto& node : status.node()) {
    out["cluster"].push_back({{"node_rank", node.node_rank()},
                              {"hostname", node.hostname()},
                              {"control_endpoint", node.control_endpoint()},
                              {"ranks", node.ranks()},
                              {"status_url", node.status_url()},
                              {"state", wire::enum_text(node.state())},
                              {"incarnation", node.incarnation()},
                              {"state_since_unix_s", node.state_since_unix_s()},
                              {"last_heard_unix_s", node.last_heard_unix_s()},
                              {"state_reason", node.state_reason()}});
  }
  out["peers"] = nlohmann::json::array();
  for (const auto& peer : status.peer()) {
    out["peers"].push_back({{"node_rank", peer.node_rank()},
                            {"transport", peer.transport()},
                            {"reason", peer.reason()},
                            {"up", peer.up()},
                            {"data_endpoint", peer.data_endpoint()}});
  }
  out["jobs"] = nlohmann::json::array();  // the root's; empty on the other nodes
  for (const auto& job : status.jobs()) out["jobs"].push_back(job_record_json(job));
  return out;
}

}  // namespace symmesh
