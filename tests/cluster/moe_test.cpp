// MoE jobs through real daemons and the real CLI: dispatch and both combines verified with the
// --json figures, the hierarchical combine's inter-node bytes against flat's, and bad jobs that
// fail naming the field while the daemons go on.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

const char* kJsonKeys[] = {
    "status",           "verified",         "max_abs_err",          "tolerance",
    "deterministic",    "median_s",         "tokens_per_s",         "algbw_gbps",
    "inter_node_bytes", "intra_node_bytes", "flat_inter_node_bytes"};

nlohmann::json submit(TestCluster& cluster, const std::string& args) {
  CliRun run = cli(target(cluster) + " submit " + args + " --json");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  return nlohmann::json::parse(run.out);
}

TEST(MoeJobs, DispatchAndBothCombinesVerifyThroughTheDaemons) {
  ClusterOptions options = shape(2, 2);
  options.heap_size = "128MiB";
  TestCluster cluster(options);
  const std::string shape_args =
      " --tokens 64 --hidden 128 --topk 8 --experts 16 --iters 2 --verify";
  const auto dispatched = submit(cluster, "dispatch" + shape_args);
  EXPECT_EQ(dispatched["verified"], true) << dispatched.dump();
  EXPECT_EQ(dispatched["max_abs_err"], 0.0);
  const auto hier = submit(cluster, "combine --algo hier --bias 2" + shape_args);
  const auto flat = submit(cluster, "combine --algo flat --bias 2" + shape_args);
  for (const auto& json : {dispatched, hier, flat}) {
    for (const char* key : kJsonKeys) EXPECT_TRUE(json.contains(key)) << key << json.dump();
    EXPECT_EQ(json["status"], "ok") << json.dump();
    EXPECT_EQ(json["deterministic"], true) << json.dump();
    EXPECT_GT(json["tokens_per_s"].get<double>(), 0);
  }
  EXPECT_EQ(hier["verified"], true) << hier.dump();
  EXPECT_EQ(flat["verified"], true) << flat.dump();
  EXPECT_LE(hier["inter_node_bytes"].get<int64_t>() * 2, flat["inter_node_bytes"].get<int64_t>());
  EXPECT_EQ(flat["inter_node_bytes"], flat["flat_inter_node_bytes"]);
}

TEST(MoeJobs, BadJobsNameTheFieldAndTheClusterGoesOn) {
  TestCluster cluster(shape(2, 1));
  CliRun hidden =
      cli(target(cluster) + " submit combine --tokens 4 --hidden 12 --topk 1 --experts 2 --json");
  EXPECT_NE(hidden.exit_code, 0);
  EXPECT_NE(nlohmann::json::parse(hidden.out)["error"].get<std::string>().find("multiple of 8"),
            std::string::npos)
      << hidden.out;
  CliRun chunk = cli(target(cluster) +
                     " submit combine --tokens 4 --hidden 8 --topk 1 --experts 2 --chunk-tokens 33 "
                     "--json");
  EXPECT_NE(chunk.exit_code, 0);
  EXPECT_NE(nlohmann::json::parse(chunk.out)["error"].get<std::string>().find("half of"),
            std::string::npos)
      << chunk.out;
  EXPECT_EQ(
      submit(cluster, "combine --tokens 16 --hidden 8 --topk 2 --experts 4 --verify")["verified"],
      true);
}

}  // namespace
}  // namespace symmesh::testing
