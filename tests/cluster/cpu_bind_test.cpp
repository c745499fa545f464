// --cpu-bind core end to end: while a job runs, each PE thread may run on one CPU only and the
// threads a PE starts for itself on all of the daemon's CPUs; the log says where the PEs went.
// And the CPUs a daemon sizes jobs for: the status shows them and the fused operators' default
// split, which a matmul job without thread flags runs with; explicit flags win.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cpu_binding.h"
#include "common/cpu_budget.h"
#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

// The value of `key` ("Cpus_allowed_list") in a /proc status file.
std::string status_field(const std::filesystem::path& status, const std::string& key) {
  std::ifstream in(status);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":\t", 0) == 0) return line.substr(key.size() + 2);
  }
  return "";
}

// (thread name, the CPUs it may run on) for every thread of `pid`.
std::vector<std::pair<std::string, std::string>> thread_cpus(pid_t pid) {
  std::vector<std::pair<std::string, std::string>> threads;
  std::error_code error;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", error)) {
    threads.emplace_back(status_field(task.path() / "status", "Name"),
                         status_field(task.path() / "status", "Cpus_allowed_list"));
  }
  return threads;
}

TEST(CpuBind, ARunningJobsPesAreBoundAndTheThreadsTheyStartAreNot) {
  const std::vector<int> allowed = allowed_cpus();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 CPUs to tell one CPU from all";
  ClusterOptions options = shape(2, 1);
  options.extra_args = {"--cpu-bind", "core"};
  TestCluster cluster(options);
  for (int node = 0; node < 2; ++node) {  // one PE per daemon: different CPUs
    EXPECT_NE(cluster.daemon(node).log().find("PEs bound to CPUs " + std::to_string(allowed[node]) +
                                              " ("),
              std::string::npos)
        << cluster.daemon(node).log();
  }
  CliRun long_run;
  std::atomic<bool> returned{false};  // the CLI came back: the job is over, polling is pointless
  std::jthread long_job([&] {
    long_run = cli(target(cluster) +
                   " --timeout 300s submit matmul --op gemm-allreduce --m 1024 --n 1024 "
                   "--k 1024 --mode fused --iters 1000 --json");
    returned = true;
  });
  // A thread starts with its creator's name, so a helper may briefly be called "pe0 main" too:
  // wait until some "pe0 main" runs on the PE's one CPU and some other "pe0 " thread on all.
  const pid_t daemon = cluster.daemon(0).pid();
  const std::string every_cpu =
      status_field("/proc/" + std::to_string(daemon) + "/status", "Cpus_allowed_list");
  const std::string pe_cpu = std::to_string(allowed[0]);
  bool pe_bound = false, helper_unbound = false;
  std::string last_seen;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < 6000 && !(pe_bound && helper_unbound) && !returned &&
                  std::chrono::steady_clock::now() < deadline;
       ++i) {
    std::string seen;
    for (const auto& [name, cpus] : thread_cpus(daemon)) {
      if (name.rfind("pe0 ", 0) != 0) continue;
      seen += name + ": " + cpus + "; ";
      pe_bound |= name == "pe0 main" && cpus == pe_cpu;
      helper_unbound |= name != "pe0 main" && cpus == every_cpu;
    }
    if (!seen.empty()) last_seen = seen;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(pe_bound) << "no \"pe0 main\" thread on CPU " << pe_cpu
                        << "; last seen: " << last_seen;
  EXPECT_TRUE(helper_unbound) << "no helper of PE 0 on CPUs " << every_cpu
                              << "; last seen: " << last_seen;
  // Cancel it (nothing above returns early), so the join does not wait for its 1000 calls.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int i = 0; i < 600 && !returned && std::chrono::steady_clock::now() < until; ++i) {
    if (const uint64_t job = find_job(cluster, "matmul", "running")) {
      cli(target(cluster) + " cancel " + std::to_string(job));
      break;
    }
  }
  long_job.join();
  EXPECT_NE(long_run.out.find("cancelled"), std::string::npos) << long_run.out;
}

TEST(CpuBudget, StatusShowsTheSplitAndAMatmulJobRunsWithItUnlessItSaysOtherwise) {
  ClusterOptions options = shape(2, 2);
  options.extra_args = {"--cpus", "8"};  // 4 a PE: 3 compute + 1 comm
  TestCluster cluster(options);
  const CliRun status = cli(target(cluster) + " status --json");
  ASSERT_EQ(status.exit_code, 0) << status.out;
  const auto cpus = nlohmann::json::parse(status.out)["cpus"];
  EXPECT_EQ(cpus["usable"], 8) << status.out;
  EXPECT_EQ(cpus["from_flag"], true) << status.out;
  EXPECT_EQ(cpus["fused_compute_threads"], 3) << status.out;
  EXPECT_EQ(cpus["fused_comm_threads"], 1) << status.out;
  EXPECT_EQ(cpus["allowed"], cpu_list_text(allowed_cpus())) << status.out;
  if (allowed_cpus().size() < 8) {  // the daemon says its jobs' threads share fewer CPUs
    EXPECT_NE(cluster.daemon(0).log().find(
                  "more than the " + std::to_string(allowed_cpus().size()) + " CPUs it may run on"),
              std::string::npos)
        << cluster.daemon(0).log();
  }
  const CliRun text = cli(target(cluster) + " status");
  EXPECT_NE(text.out.find("CPUs: 8 from --cpus"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("3 compute + 1 comm threads per PE"), std::string::npos) << text.out;

  const std::string matmul =
      " submit matmul --op matmul-reduce-scatter --m 64 --n 48 --k 32 --mode fused --iters 1 "
      "--verify --json";
  const CliRun by_default = cli(target(cluster) + matmul);
  ASSERT_EQ(by_default.exit_code, 0) << by_default.out;
  const auto result = nlohmann::json::parse(by_default.out);
  EXPECT_EQ(result["compute_threads"], 3) << by_default.out;
  EXPECT_EQ(result["comm_threads"], 1) << by_default.out;
  EXPECT_EQ(result["verified"], true) << by_default.out;
  const CliRun told = cli(target(cluster) + matmul + " --compute-threads 2 --comm-threads 2");
  ASSERT_EQ(told.exit_code, 0) << told.out;
  EXPECT_EQ(nlohmann::json::parse(told.out)["compute_threads"], 2) << told.out;
  EXPECT_EQ(nlohmann::json::parse(told.out)["comm_threads"], 2) << told.out;
}

}  // namespace
}  // namespace symmesh::testing
