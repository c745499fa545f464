// Fused matmul jobs through real daemons and the real CLI: every operator on several cluster
// shapes with --verify and the --json figures, .npy inputs and outputs checked against a
// reference computed here, and bad jobs that fail with a clear error while the daemons go on.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "ops/npy.h"
#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

const char* kOps[] = {"matmul-reduce-scatter", "gemm-allreduce", "allgather-matmul"};
const char* kJsonKeys[] = {"status",      "verified",  "max_abs_err",  "max_rel_err",
                           "tolerance",   "compute_s", "comm_s",       "sequential_s",
                           "pipelined_s", "speedup",   "time_saved_s", "overlap_efficiency",
                           "gflops",      "wire_gbps", "gemm_path"};

nlohmann::json submit_json(TestCluster& cluster, const std::string& args) {
  CliRun run = cli(target(cluster) + " submit matmul " + args + " --json");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  return nlohmann::json::parse(run.out);
}

class MatmulJobs : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(MatmulJobs, EveryOperatorVerifiesThroughTheDaemons) {
  TestCluster cluster(shape(GetParam().first, GetParam().second));
  for (const char* op : kOps) {
    const auto json = submit_json(cluster, std::string("--op ") + op +
                                               " --m 75 --n 33 --k 40 --dtype bf16 --tile-m 16 "
                                               "--tile-n 16 --comm-interval 2 --iters 2 --verify");
    for (const char* key : kJsonKeys) EXPECT_TRUE(json.contains(key)) << op << ": " << key;
    EXPECT_EQ(json["status"], "ok") << json.dump();
    EXPECT_EQ(json["verified"], true) << json.dump();
    EXPECT_EQ(json["deterministic"], true) << json.dump();
    EXPECT_LE(json["max_abs_err"].get<double>(), json["tolerance"].get<double>());
    EXPECT_GT(json["pipelined_s"].get<double>(), 0) << json.dump();
    EXPECT_NE(json["gemm_path"].get<std::string>().find("bf16: "), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatmulJobs,
                         ::testing::Values(std::pair{1, 1}, std::pair{1, 3}, std::pair{2, 2},
                                           std::pair{3, 1}),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "x" +
                                  std::to_string(info.param.second);
                         });

TEST(MatmulJob, SequentialModeHasNoPipelinedFigures) {
  TestCluster cluster(shape(2, 1));
  const auto json =
      submit_json(cluster, "--op gemm-allreduce --m 40 --n 24 --k 16 --mode sequential");
  EXPECT_EQ(json["status"], "ok");
  EXPECT_TRUE(json["pipelined_s"].is_null()) << json.dump();
  EXPECT_TRUE(json["verified"].is_null()) << json.dump();
  EXPECT_GT(json["sequential_s"].get<double>(), 0);
}

// Auto: the first job plans from its runs, the next keeps the plan; the job's time is the
// chosen mode's median.
TEST(MatmulJob, AutoPlansOnceAndTheNextJobKeepsThePlan) {
  TestCluster cluster(shape(2, 2));
  const std::string args =
      "--op matmul-reduce-scatter --m 64 --n 32 --k 48 --tile-m 16 "
      "--tile-n 16 --mode auto --iters 3 --verify";
  const auto first = submit_json(cluster, args);
  const auto second = submit_json(cluster, args);
  for (const auto& json : {first, second}) {
    EXPECT_EQ(json["status"], "ok") << json.dump();
    EXPECT_EQ(json["mode"], "auto");
    EXPECT_EQ(json["verified"], true) << json.dump();
    const std::string chosen = json["chosen"];
    ASSERT_TRUE(chosen == "fused" || chosen == "sequential") << json.dump();
    EXPECT_EQ(json["median_s"], json[chosen == "fused" ? "pipelined_s" : "sequential_s"])
        << json.dump();
  }
  EXPECT_EQ(first["planned"], true) << first.dump();
  EXPECT_EQ(second["planned"], false) << second.dump();
  EXPECT_EQ(second["chosen"], first["chosen"]);
}

TEST(MatmulJob, NpyInputsAndOutputsMatchAReferenceComputedHere) {
  TestCluster cluster(shape(2, 1));
  const std::filesystem::path in = cluster.dir() + "/inputs", out = cluster.dir() + "/outputs";
  std::filesystem::create_directories(in);
  const int m = 9, n = 5, k = 7, pes = 2;
  std::vector<std::vector<float>> a(pes, std::vector<float>(m * k));
  std::vector<float> b(k * n);
  for (int pe = 0; pe < pes; ++pe) {
    for (int i = 0; i < m * k; ++i) a[pe][i] = float((i * 3 + pe * 5) % 11 - 5) / 4;
    write_npy_f32((in / ("A_" + std::to_string(pe) + ".npy")).string(), a[pe].data(), m, k);
  }
  for (int i = 0; i < k * n; ++i) b[i] = float((i * 7) % 13 - 6) / 8;
  write_npy_f32((in / "B.npy").string(), b.data(), k, n);

  const auto json = submit_json(cluster,
                                "--op gemm-allreduce --m 9 --n 5 --k 7 --dtype f32 "
                                "--tile-m 4 --tile-n 4 --verify --inputs " +
                                    in.string() + " --output " + out.string());
  ASSERT_EQ(json["verified"], true) << json.dump();
  for (int pe = 0; pe < pes; ++pe) {
    const NpyArray c = read_npy((out / ("C_" + std::to_string(pe) + ".npy")).string());
    ASSERT_EQ(c.descr, "<f4");
    ASSERT_EQ(c.rows, m);
    ASSERT_EQ(c.cols, n);
    const float* got = reinterpret_cast<const float*>(c.data.data());
    for (int i = 0; i < m; ++i) {
      for (int j = 0; j < n; ++j) {
        float expected = 0;  // quarters times eighths: exact in f32
        for (int p = 0; p < pes; ++p) {
          for (int x = 0; x < k; ++x) expected += a[p][i * k + x] * b[x * n + j];
        }
        EXPECT_EQ(got[i * n + j], expected) << "PE " << pe << " C[" << i << "][" << j << "]";
      }
    }
  }

  // A file of the wrong shape: the job fails naming it, and the daemons go on.
  write_npy_f32((in / "B.npy").string(), b.data(), n, k);
  CliRun bad = cli(target(cluster) +
                   " submit matmul --op gemm-allreduce --m 9 --n 5 --k 7 "
                   "--dtype f32 --inputs " +
                   in.string() + " --json");
  EXPECT_NE(bad.exit_code, 0);
  const auto error = nlohmann::json::parse(bad.out)["error"].get<std::string>();
  EXPECT_NE(error.find("B.npy: shape (5, 7) but the job needs (7, 5)"), std::string::npos) << error;
  EXPECT_EQ(submit_json(cluster, "--op allgather-matmul --m 8 --n 8 --k 8 --verify")["verified"],
            true);
}

// Files a job names must be inside the daemons' --data-dir: an absolute path elsewhere, a
// climb out with "..", and a symlink that points out are refused naming the directory.
TEST(MatmulJob, PathsOutsideTheDataDirAreRefusedAndRelativeOnesAreTakenFromIt) {
  TestCluster cluster(shape(2, 1));
  std::filesystem::create_symlink("/etc", cluster.dir() + "/escape");
  for (const std::string& path : {std::string("/etc"), std::string("../../etc"),
                                  std::string("escape"), cluster.dir() + "/escape/out"}) {
    const CliRun run = cli(target(cluster) +
                           " submit matmul --op gemm-allreduce --m 8 --n 8 --k 8 --output " + path);
    EXPECT_EQ(run.exit_code, 2) << path << ": " << run.out;
    EXPECT_NE(run.out.find("resolves outside this daemon's data directory"), std::string::npos)
        << run.out;
  }
  EXPECT_FALSE(std::filesystem::exists("/etc/C_0.npy"));
  const auto json =
      submit_json(cluster, "--op gemm-allreduce --m 8 --n 8 --k 8 --verify --output relative/out");
  EXPECT_EQ(json["verified"], true) << json.dump();
  EXPECT_TRUE(std::filesystem::exists(cluster.dir() + "/relative/out/C_1.npy"));
}

// A job's host memory is estimated before it runs and refused above --job-memory, with the
// figure and the limit, instead of ending in std::bad_alloc.
TEST(MatmulJob, AJobAboveTheHostMemoryLimitIsRefusedWithTheFigures) {
  ClusterOptions limited = shape(2, 1);
  limited.extra_args = {"--job-memory", "256MiB"};
  TestCluster cluster(limited);
  const CliRun deep =
      cli(target(cluster) + " submit matmul --op gemm-allreduce --m 64 --n 64 --k 1048576");
  EXPECT_EQ(deep.exit_code, 2) << deep.out;
  EXPECT_NE(deep.out.find("needs about"), std::string::npos) << deep.out;
  EXPECT_NE(deep.out.find("--job-memory 256.0 MiB"), std::string::npos) << deep.out;
  const CliRun huge = cli(target(cluster) +
                          " submit matmul --op matmul-reduce-scatter --m 1048576 --n 1048576 "
                          "--k 1048576");
  EXPECT_EQ(huge.exit_code, 2) << huge.out;
  EXPECT_EQ(submit_json(cluster, "--op gemm-allreduce --m 64 --n 64 --k 64 --verify")["verified"],
            true);
}

TEST(MatmulJob, BadJobsGetClearErrorsAndTheClusterGoesOn) {
  TestCluster cluster(shape(2, 1));
  CliRun zero = cli(target(cluster) + " submit matmul --op gemm-allreduce --m 0 --n 4 --k 4");
  EXPECT_EQ(zero.exit_code, 2) << zero.out;
  EXPECT_NE(zero.out.find("--m"), std::string::npos) << zero.out;

  CliRun unknown = cli(target(cluster) + " submit matmul --op matmul --m 4 --n 4 --k 4");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("gemm-allreduce"), std::string::npos) << unknown.out;

  // A workspace larger than the heap: refused by the daemon, naming what did not fit.
  CliRun huge = cli(target(cluster) +
                    " submit matmul --op matmul-reduce-scatter --m 64 --n 64 --k 8 --tile-m 4096 "
                    "--tile-n 4096 --comm-interval 64 --json");
  EXPECT_NE(huge.exit_code, 0);
  const auto error = nlohmann::json::parse(huge.out)["error"].get<std::string>();
  EXPECT_NE(error.find("workspace"), std::string::npos) << error;
  EXPECT_NE(error.find("--heap-size"), std::string::npos) << error;

  EXPECT_EQ(
      submit_json(cluster, "--op matmul-reduce-scatter --m 30 --n 20 --k 10 --verify")["verified"],
      true);
}

}  // namespace
}  // namespace symmesh::testing
