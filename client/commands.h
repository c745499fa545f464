// The CLI's subcommands, one function each: what they ask the daemon and how they print it.
// Each returns the process's exit code (0 done, 1 the job failed); errors are thrown.
#pragma once

#include <memory>
#include <string>

#include "client/client.h"
#include "wire/jobs.pb.h"

namespace symmesh {

// What every subcommand gets: the daemon to ask, the secret to prove, the deadlines, the form.
struct CliContext {
  HostPort daemon;
  std::string secret;
  std::string secret_source;  // how errors name where the secret came from
  Deadline deadline;          // --timeout: the whole command
  Deadline connect_deadline;  // --connect-timeout: reaching a daemon
  bool json = false;

  std::unique_ptr<Client> connect(const HostPort& at) const;
  // Jobs live at the root: any daemon names it in its status.
  std::unique_ptr<Client> connect_to_root(wire::StatusReply& root_status) const;
};

int show_status(const CliContext& context);
int list_jobs(const CliContext& context);
int show_job(const CliContext& context, uint64_t job_id, const std::string& trace_file);
int cancel_job(const CliContext& context, uint64_t job_id);
int wait_for_job(const CliContext& context, uint64_t job_id);
// Runs `spec` (named `kind` on the progress line) and prints its result; with `detach`,
// prints its id once queued and returns.
int submit_job(const CliContext& context, const wire::JobSpec& spec, const std::string& kind,
               bool detach);

}  // namespace symmesh
