#include "wire/json.h"

#include <stdexcept>

#include "wire/enum_text.h"

namespace symmesh {
namespace {

using google::protobuf::FieldDescriptor;

// One field of a figures message as JSON: its value, the word of an enum, or null for an
// optional field left out (a figure the job did not measure).
nlohmann::json field_json(const google::protobuf::Message& message, const FieldDescriptor& field) {
  if (field.is_repeated()) {
    throw std::logic_error("figures field " + field.full_name() +
                           " is repeated: a kind's figures are scalars and enums");
  }
  const auto& reflection = *message.GetReflection();
  if (field.has_presence() && !reflection.HasField(message, &field)) return nullptr;
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return reflection.GetDouble(message, &field);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return reflection.GetFloat(message, &field);
    case FieldDescriptor::CPPTYPE_INT32:
      return reflection.GetInt32(message, &field);
    case FieldDescriptor::CPPTYPE_INT64:
      return reflection.GetInt64(message, &field);
    case FieldDescriptor::CPPTYPE_UINT32:
      return reflection.GetUInt32(message, &field);
    case FieldDescriptor::CPPTYPE_UINT64:
      return reflection.GetUInt64(message, &field);
    case FieldDescriptor::CPPTYPE_BOOL:
      return reflection.GetBool(message, &field);
    case FieldDescriptor::CPPTYPE_STRING:
      return reflection.GetString(message, &field);
    case FieldDescriptor::CPPTYPE_ENUM:
      return wire::enum_text(*field.enum_type(), reflection.GetEnumValue(message, &field));
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  throw std::logic_error("figures field " + field.full_name() +
                         " is a message: a kind's figures are scalars and enums");
}

}  // namespace

nlohmann::json job_result_json(const wire::JobResult& result) {
  nlohmann::json out{{"status", result.ok() ? "ok" : "error"}};
  if (!result.ok()) out["error"] = result.error();
  if (result.job_id()) out["job_id"] = result.job_id();
  if (result.kind() == wire::JOB_KIND_UNSPECIFIED) return out;
  out["kind"] = wire::enum_text(result.kind());
  out["algo"] = result.algo();
  if (!result.op().empty()) out["op"] = result.op();
  if (!result.dtype().empty()) out["dtype"] = result.dtype();
  out["iters"] = result.iters();
  out["pes"] = result.pes();
  out["nodes"] = result.nodes();
  out["median_s"] = result.median_s();
  out["p50_us"] = result.p50_us();
  out["p99_us"] = result.p99_us();
  const bool verify = result.verify_requested();  // else null: not checked
  out["verified"] = verify ? nlohmann::json(result.verified()) : nullptr;
  out["max_abs_err"] = verify ? nlohmann::json(result.max_abs_err()) : nullptr;
  out["wait_by_peer_s"] =
      std::vector<double>(result.wait_by_peer_s().begin(), result.wait_by_peer_s().end());
  out["blocked_s"] = std::vector<double>(result.blocked_s().begin(), result.blocked_s().end());
  out["straggler"] = result.has_straggler() ? nlohmann::json(result.straggler()) : nullptr;
  out["straggler_share"] =
      result.has_straggler_share() ? nlohmann::json(result.straggler_share()) : nullptr;
  // The kind's own figures, each field under its name.
  const wire::KindFigures& figures = result.figures();
  const FieldDescriptor* set = figures.GetReflection()->GetOneofFieldDescriptor(
      figures, figures.GetDescriptor()->FindOneofByName("kind"));
  if (set) {
    const auto& message = figures.GetReflection()->GetMessage(figures, set);
    const auto& type = *message.GetDescriptor();
    for (int i = 0; i < type.field_count(); ++i) {
      out[type.field(i)->name()] = field_json(message, *type.field(i));
    }
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
