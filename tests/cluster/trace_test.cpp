// Job timelines and the progress line through real daemons and the real CLI: a traced job's
// spans for every PE written as valid Chrome trace JSON (also at GET /jobs/ID/trace), the
// errors for jobs without a trace, progress events and a cancelled job's timeline, and the
// progress line drawn on a terminal only.
#include <httplib.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>

#include "tests/cluster/test_cluster.h"
#include "tests/common/chrome_trace_check.h"
#include "wire/chrome_trace.h"

namespace symmesh::testing {
namespace {

nlohmann::json read_json(const std::string& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

TEST(Trace, ATracedMatmulJobHasEveryPesComputeAndCommSpansAsValidChromeJson) {
  TestCluster cluster(shape(2, 2));
  const uint64_t id = submit_job(cluster,
                                 "matmul --op matmul-reduce-scatter --m 256 --n 256 --k 256 "
                                 "--tile-m 64 --tile-n 64 --iters 2 --trace");
  ASSERT_NE(id, 0u);
  const std::string file = cluster.dir() + "/trace.json";
  CliRun written =
      cli(target(cluster) + " job " + std::to_string(id) + " --trace " + file + " --json");
  ASSERT_EQ(written.exit_code, 0) << written.out;
  const auto record = nlohmann::json::parse(written.out);
  EXPECT_EQ(record["traced"], true);
  EXPECT_EQ(record["trace_file"], file);

  const nlohmann::json trace = read_json(file);
  ASSERT_EQ(chrome_trace_problem(trace), "");
  std::set<int> pes;
  std::set<std::string> categories;
  size_t spans = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++spans;
    pes.insert(e["pid"].get<int>());
    categories.insert(e["cat"].get<std::string>());
  }
  EXPECT_EQ(pes, (std::set<int>{0, 1, 2, 3}));
  for (const char* category : {"iteration", "compute", "comm", "barrier"}) {
    EXPECT_TRUE(categories.count(category)) << category;
  }
  EXPECT_EQ(record["trace_spans"], spans);
  EXPECT_EQ(trace["otherData"]["job_id"], id);

  // The dashboard's source: the same trace over HTTP, at the root only.
  const std::string url =
      nlohmann::json::parse(cli(target(cluster) + " status --json").out)["status_url"];
  httplib::Client http(url);
  auto res = http.Get("/jobs/" + std::to_string(id) + "/trace");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(nlohmann::json::parse(res->body)["traceEvents"].size(), trace["traceEvents"].size());
  auto untraced = http.Get("/jobs/1/trace");  // the bootstrap barrier
  ASSERT_TRUE(untraced);
  EXPECT_EQ(untraced->status, 404);
  EXPECT_NE(untraced->body.find("not traced"), std::string::npos) << untraced->body;
}

TEST(Trace, JobsWithoutATraceSayWhyAndACancelledJobKeepsItsTimeline) {
  TestCluster cluster(shape(2, 1));
  ASSERT_EQ(cli(target(cluster) + " submit barrier --iters 3").exit_code, 0);  // job 2
  const std::string file = cluster.dir() + "/none.json";
  CliRun not_traced = cli(target(cluster) + " job 2 --trace " + file);
  EXPECT_EQ(not_traced.exit_code, 2) << not_traced.out;
  EXPECT_NE(not_traced.out.find("submit it with --trace"), std::string::npos) << not_traced.out;
  CliRun unknown = cli(target(cluster) + " job 99 --trace " + file);
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("no job 99"), std::string::npos) << unknown.out;

  // A traced job cancelled while it runs: its progress events count PE 0's iterations, and
  // the timeline it leaves ends where the abort stopped it.
  wire::JobSpec spec = barrier_job("dissemination", 100000);
  spec.set_trace(true);
  std::mutex mutex;
  std::condition_variable changed;
  wire::JobEvent last;
  std::optional<wire::JobResult> result;
  std::jthread submitter([&] {
    auto client = cluster.client();
    const wire::JobResult r = client->submit(
        spec,
        [&](const wire::JobEvent& event) {
          std::lock_guard lock(mutex);
          last = event;
          changed.notify_all();
        },
        deadline_after(std::chrono::seconds(300)));
    std::lock_guard lock(mutex);
    result = r;
    changed.notify_all();
  });
  uint64_t id = 0;
  {
    std::unique_lock lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(120),
                                 [&] { return last.iteration() > 0 || result; }));
    ASSERT_FALSE(result) << "the job ended before a progress event";
    EXPECT_EQ(last.iterations(), 100000u);
    EXPECT_LE(last.iteration(), last.iterations());
    EXPECT_GT(last.elapsed_s(), 0.0);
    id = last.job_id();
  }
  auto canceller = cluster.client();
  canceller->cancel(id, deadline_after(std::chrono::seconds(30)));
  submitter.join();
  ASSERT_TRUE(result);
  EXPECT_FALSE(result->ok());
  const wire::JobRecord record = canceller->job(id, true, deadline_after(std::chrono::seconds(30)));
  EXPECT_EQ(wire::enum_text(record.state()), "cancelled");
  size_t spans = 0;
  for (const auto& thread : record.trace().thread()) spans += size_t(thread.span_size());
  EXPECT_GT(spans, 0u);
  EXPECT_EQ(chrome_trace_problem(chrome_trace_json(record)), "");
}

// Runs the CLI with its stdin, stdout and stderr on a pseudo-terminal and returns everything
// it wrote there (bounded in time).
CliRun cli_on_terminal(const std::string& args) {
  int terminal = -1;
  const pid_t pid = forkpty(&terminal, nullptr, nullptr, nullptr);
  if (pid == 0) {
    setenv("SYMMESH_PROGRESS_AFTER", "0s", 1);  // draw from the first event on
    const std::string command = bin_dir() + "/symmesh " + args;
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string out;
  char buffer[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::chrono::steady_clock::now() < deadline) {
    const ssize_t n = read(terminal, buffer, sizeof buffer);
    if (n <= 0) break;  // EIO once the child has gone
    out.append(buffer, size_t(n));
  }
  close(terminal);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(Cli, AProgressLineOnATerminalAndNothingOnAPipe) {
  TestCluster cluster(shape(2, 1));
  const std::string job = " submit barrier --iters 2000";
  CliRun terminal = cli_on_terminal(target(cluster) + job);
  ASSERT_EQ(terminal.exit_code, 0) << terminal.out;
  // The root's first event of a running job arrives before its result, and the line is
  // erased ("\r" and erase-line) before the result is printed.
  EXPECT_NE(terminal.out.find("barrier: "), std::string::npos) << terminal.out;
  EXPECT_NE(terminal.out.find("s elapsed"), std::string::npos) << terminal.out;
  EXPECT_NE(terminal.out.find("\r\033[K"), std::string::npos) << terminal.out;
  EXPECT_NE(terminal.out.find("barrier"), std::string::npos);

  CliRun piped = cli(target(cluster) + job);  // stdout and stderr into a pipe
  ASSERT_EQ(piped.exit_code, 0) << piped.out;
  EXPECT_EQ(piped.out.find("elapsed"), std::string::npos) << piped.out;
  EXPECT_EQ(piped.out.find('\033'), std::string::npos) << piped.out;

  // --json on a terminal: one JSON object, no progress line.
  CliRun json = cli_on_terminal(target(cluster) + job + " --json");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  EXPECT_EQ(json.out.find("elapsed"), std::string::npos) << json.out;
  EXPECT_EQ(nlohmann::json::parse(json.out)["status"], "ok");
}

}  // namespace
}  // namespace symmesh::testing
