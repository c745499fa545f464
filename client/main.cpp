// symmesh: the command-line client. The subcommands are a table of (CLI11 subcommand, what it
// runs); `submit`'s kinds come from their own tables (client/submit/).
#include <CLI/CLI.hpp>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>

#include "client/commands.h"
#include "client/launch.h"
#include "client/output.h"
#include "client/submit/submit_kind.h"
#include "common/errors.h"
#include "common/units.h"
#include "transport/secret_file.h"

namespace symmesh {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

// The options every subcommand shares, as given.
struct GlobalOptions {
  std::string daemon = env_or("SYMMESH_DAEMON", "127.0.0.1:7400");
  std::string secret_file = env_or("SYMMESH_SECRET_FILE", "");
  std::string timeout = "3600s";
  std::string connect_timeout = "10s";
  bool json = false;
};

void add_global_options(CLI::App& app, GlobalOptions& g) {
  app.add_option("--daemon", g.daemon, "HOST:PORT of any daemon (env SYMMESH_DAEMON)")
      ->capture_default_str();
  app.add_option("--secret-file", g.secret_file, "cluster secret (env SYMMESH_SECRET_FILE)");
  app.add_option("--timeout", g.timeout, "give up waiting for the daemon after this long")
      ->capture_default_str();
  app.add_option("--connect-timeout", g.connect_timeout,
                 "give up reaching the daemon after this long (it may still be starting)")
      ->capture_default_str();
  app.add_flag("--json", g.json, "print one JSON object");
}

CliContext make_context(const GlobalOptions& g) {
  CliContext context;
  context.deadline = deadline_after(parse_duration(g.timeout, "--timeout"));
  if (g.secret_file.empty()) {
    throw InvalidArgument(
        "no secret: set --secret-file or SYMMESH_SECRET_FILE (the file "
        "deploy/local-cluster.sh prints)");
  }
  context.secret = read_secret_file(g.secret_file);
  context.secret_source = "'" + g.secret_file + "'";
  context.daemon = parse_host_port(g.daemon, "--daemon");
  // A daemon that is not there fails fast; a job that runs long may use all of --timeout.
  context.connect_deadline = std::min(
      context.deadline, deadline_after(parse_duration(g.connect_timeout, "--connect-timeout")));
  context.json = g.json;
  return context;
}

// Exit codes: 0 done, 1 the job failed, 2 the request was wrong, 3 the cluster could not
// take it (unreachable, a node down).
int exit_code_of(const std::exception& e) {
  if (dynamic_cast<const PeerError*>(&e)) return 3;
  return dynamic_cast<const InvalidArgument*>(&e) ? 2 : 1;
}

struct Command {
  CLI::App* app;
  std::function<int(const CliContext&)> run;
};

}  // namespace
}  // namespace symmesh

int main(int argc, char** argv) {
  using namespace symmesh;
  CLI::App app{"symmesh: submit jobs to a symmesh cluster and watch it"};
  app.require_subcommand(1);
  // A subcommand passes the options it does not know up to its parent, so the global options
  // may come anywhere before launch's `--` (as in git and kubectl). Subcommands added below
  // inherit it.
  app.fallthrough();
  GlobalOptions global;
  add_global_options(app, global);
  auto add_json = [&](CLI::App* command) {
    command->add_flag("--json", global.json, "print one JSON object");
    return command;
  };
  uint64_t job_id = 0;
  auto add_id = [&](CLI::App* command, const char* help) {
    command->add_option("ID", job_id, help)->required();
    return add_json(command);
  };
  std::string trace_file;
  auto* job_cmd = add_id(app.add_subcommand("job", "one job: its state, times and result"),
                         "the job id (symmesh jobs lists them)");
  job_cmd->add_option("--trace", trace_file,
                      "write the job's timeline (submitted with --trace) to FILE as Chrome "
                      "trace-event JSON, for Perfetto or chrome://tracing");
  std::vector<Command> commands{
      {add_json(app.add_subcommand("status", "the cluster as the daemon sees it")), show_status},
      {add_json(app.add_subcommand(
           "jobs", "queued and running jobs, then the last 50 finished (the root's)")),
       list_jobs},
      {job_cmd, [&](const CliContext& c) { return show_job(c, job_id, trace_file); }},
      {add_id(app.add_subcommand("cancel",
                                 "cancel a queued job, or abort a running one on every node"),
              "the job id"),
       [&](const CliContext& c) { return cancel_job(c, job_id); }},
      {add_id(app.add_subcommand("wait",
                                 "follow a job (one submitted with --detach, say) to its result; "
                                 "leaving does not cancel it"),
              "the job id"),
       [&](const CliContext& c) { return wait_for_job(c, job_id); }},
  };

  std::vector<std::string> launched;
  uint32_t attach_timeout_s = 60;
  auto* launch_cmd = app.add_subcommand(
      "launch",
      "start one process per PE of this node, each attached to its PE (run it on every node): "
      "symmesh launch -- CMD ARGS");
  launch_cmd->add_option("CMD", launched, "the command and its arguments, after --")->required();
  launch_cmd
      ->add_option("--attach-timeout", attach_timeout_s,
                   "seconds each PE waits for its process (node 0 sets it)")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));
  commands.push_back(
      {launch_cmd, [&](const CliContext& c) { return launch(c, launched, attach_timeout_s); }});

  auto* submit_cmd = app.add_subcommand(
      "submit",
      "run a job on the whole cluster and wait for its result; interrupting the CLI cancels it");
  submit_cmd->require_subcommand(1);
  bool trace = false;
  bool detach = false;
  std::vector<std::unique_ptr<SubmitCommand>> kinds;  // CLI11 holds references into each
  for (SubmitKind& kind : submit_kinds()) {
    auto& command = *kinds.emplace_back(std::make_unique<SubmitCommand>(*submit_cmd, kind));
    command.app()->add_flag("--trace", trace,
                            "record every PE's timeline (then: symmesh job ID --trace FILE)");
    command.app()->add_flag("--detach", detach,
                            "print the job's id once it is queued and return; the job runs on "
                            "(then: symmesh wait ID, symmesh job ID)");
    add_json(command.app());
    SubmitCommand* submit = &command;
    commands.push_back({command.app(), [submit, &trace, &detach](const CliContext& c) {
                          wire::JobSpec spec = submit->spec();
                          spec.set_trace(trace);
                          return submit_job(c, spec, submit->app()->get_name(), detach);
                        }});
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    if (global.json) {
      print_error_json(std::string(e.what()) + " (see symmesh --help)");
      return 2;
    }
    app.exit(e);  // prints the message
    return 2;
  }

  try {
    const CliContext context = make_context(global);
    for (const Command& command : commands) {
      if (command.app->parsed()) return command.run(context);
    }
    throw InvalidArgument("no command given (see symmesh --help)");
  } catch (const std::exception& e) {
    if (global.json) {
      print_error_json(e.what());
    } else {
      std::cerr << "symmesh: " << e.what() << "\n";
    }
    return exit_code_of(e);
  }
}
