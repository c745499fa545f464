#include "client/commands.h"

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <iostream>

#include "client/output.h"
#include "client/progress_line.h"
#include "common/errors.h"
#include "common/units.h"

namespace symmesh {
namespace {

// How long a job runs before the progress line appears (tests set it).
std::chrono::milliseconds progress_after() {
  const char* value = std::getenv("SYMMESH_PROGRESS_AFTER");
  return parse_duration(value && *value ? value : "1s", "SYMMESH_PROGRESS_AFTER");
}

}  // namespace

std::unique_ptr<Client> CliContext::connect(const HostPort& at) const {
  return Client::connect(at, secret, secret_source, connect_deadline);
}

std::unique_ptr<Client> CliContext::connect_to_root(wire::StatusReply& root_status) const {
  auto client = connect(daemon);
  root_status = client->status(deadline);
  if (root_status.node_rank() == 0) return client;
  if (root_status.node_size() == 0) throw PeerError("the daemon does not know the root yet");
  const HostPort root =
      parse_host_port(root_status.node(0).control_endpoint(), "the root's control endpoint");
  client = connect(root);
  root_status = client->status(deadline);
  return client;
}

int show_status(const CliContext& context) {
  print_status(context.connect(context.daemon)->status(context.deadline), context.json);
  return 0;
}

int list_jobs(const CliContext& context) {
  wire::StatusReply status;
  context.connect_to_root(status);
  print_jobs({status.jobs().begin(), status.jobs().end()}, context.json);
  return 0;
}

int show_job(const CliContext& context, uint64_t job_id, const std::string& trace_file) {
  wire::StatusReply status;
  const wire::JobRecord job =
      context.connect_to_root(status)->job(job_id, !trace_file.empty(), context.deadline);
  print_job(job, context.json, trace_file);
  return job.state() == wire::JOB_STATE_ERROR || job.state() == wire::JOB_STATE_CANCELLED ? 1 : 0;
}

int cancel_job(const CliContext& context, uint64_t job_id) {
  wire::StatusReply status;
  print_job(context.connect_to_root(status)->cancel(job_id, context.deadline), context.json);
  return 0;
}

int wait_for_job(const CliContext& context, uint64_t job_id) {
  wire::StatusReply status;
  auto client = context.connect_to_root(status);
  ProgressLine progress("job " + std::to_string(job_id), ProgressLine::wanted(context.json),
                        progress_after());
  const wire::JobResult result = client->wait(
      job_id, [&](const wire::JobEvent& event) { progress.update(event); }, context.deadline);
  progress.clear();
  print_result(result, context.json);
  return result.ok() ? 0 : 1;
}

int submit_job(const CliContext& context, const wire::JobSpec& spec, const std::string& kind,
               bool detach) {
  auto client = context.connect(context.daemon);
  if (detach) {
    const uint64_t id = client->submit_detached(spec, context.deadline);
    if (context.json) {
      std::cout << nlohmann::json{{"job_id", id}, {"state", "queued"}}.dump() << "\n";
    } else {
      std::cout << "job " << id << " queued (detached): symmesh wait " << id << "\n";
    }
    return 0;
  }
  ProgressLine progress(kind, ProgressLine::wanted(context.json), progress_after());
  const wire::JobResult result = client->submit(
      spec, [&](const wire::JobEvent& event) { progress.update(event); }, context.deadline);
  progress.clear();
  print_result(result, context.json);
  if (spec.trace() && result.job_id() && !context.json) {
    std::cerr << "symmesh: job " << result.job_id()
              << " was traced; write its timeline with: symmesh job " << result.job_id()
              << " --trace job" << result.job_id() << ".json\n";
  }
  return result.ok() ? 0 : 1;
}

}  // namespace symmesh
