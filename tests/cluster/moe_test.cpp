// MoE jobs through real daemons and the real CLI: dispatch and both combines verified with the
// --json figures, the hierarchical combine's inter-node bytes against flat's, a node left out,
// .npy inputs and outputs, and bad jobs that fail naming the field or file while the daemons go
// on.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "ops/npy.h"
#include "runtime/collectives/dtype.h"
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

// `submit ARGS` fails with an error that says `message`.
void expect_refused(TestCluster& cluster, const std::string& args, const std::string& message) {
  CliRun run = cli(target(cluster) + " submit " + args + " --json");
  EXPECT_NE(run.exit_code, 0) << args;
  const std::string error = nlohmann::json::parse(run.out)["error"].get<std::string>();
  EXPECT_NE(error.find(message), std::string::npos) << args << ": " << error;
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

// --active-nodes: node 1's PE makes no call, the others' dispatch and combine verify (and still
// cross between nodes 0 and 2); what cannot leave nodes out is refused naming why; then every
// node serves the next job.
TEST(MoeJobs, ANodeLeftOutTakesNoPartAndTheOthersVerify) {
  ClusterOptions options = shape(3, 1);
  options.heap_size = "128MiB";
  TestCluster cluster(options);
  const std::string shape_args =
      " --tokens 64 --hidden 64 --topk 4 --experts 12 --iters 2 --verify";
  for (const char* op : {"dispatch", "combine --bias 1"}) {
    const auto json = submit(cluster, std::string(op) + shape_args + " --active-nodes 5");
    EXPECT_EQ(json["status"], "ok") << json.dump();
    EXPECT_EQ(json["verified"], true) << json.dump();
    EXPECT_GT(json["inter_node_bytes"].get<int64_t>(), 0) << json.dump();
  }
  const std::pair<const char*, const char*> refused[] = {
      {"--active-nodes 8", "names a node past the cluster's 3"},
      {"--active-nodes 5 --algo low-latency",
       "leaving nodes out is not available with --algo "
       "low-latency: allowed hier"},
  };
  for (const auto& [args, message] : refused) {
    expect_refused(cluster,
                   std::string("combine --tokens 8 --hidden 64 --topk 4 --experts 12 ") + args,
                   message);
  }
  EXPECT_EQ(submit(cluster, "combine" + shape_args)["verified"], true);
}

// The low-latency algorithm through the CLI: dispatch and combine verified, p50 and p99 per call,
// its bytes named; what it cannot run is refused naming the option, and the daemons go on.
TEST(MoeJobs, LowLatencyDispatchAndCombineVerifyAndReportTheirLatencies) {
  ClusterOptions options = shape(2, 2);
  options.heap_size = "128MiB";
  TestCluster cluster(options);
  const std::string shape_args =
      " --algo low-latency --tokens 24 --hidden 64 --topk 8 --experts 16 --iters 4 --verify";
  for (const char* op : {"dispatch", "combine"}) {
    const auto json = submit(cluster, op + shape_args);
    EXPECT_EQ(json["status"], "ok") << json.dump();
    EXPECT_EQ(json["algo"], "low-latency") << json.dump();
    EXPECT_EQ(json["verified"], true) << json.dump();
    EXPECT_EQ(json["deterministic"], true) << json.dump();
    EXPECT_GE(json["p99_us"].get<double>(), json["p50_us"].get<double>()) << json.dump();
    EXPECT_GT(json["inter_node_bytes"].get<int64_t>(), 0) << json.dump();
  }
  const std::pair<const char*, const char*> refused[] = {
      {"combine --tokens 24 --weighting none",
       "weighting none is not available with --algo low-latency"},
      {"combine --tokens 24 --bias 1",
       "biases = 1 is not available with --algo low-latency: allowed 0"},
      {"combine --tokens 24 --partial-dtype f32",
       "partial dtype f32 is not available with --algo low-latency"},
      {"dispatch --tokens 8193", "tokens = 8193 is out of range: allowed 0 to 8192"},
  };
  for (const auto& [args, message] : refused) {
    expect_refused(cluster,
                   std::string(args) + " --algo low-latency --hidden 64 --topk 8 --experts 16",
                   message);
  }
  expect_refused(cluster, "dispatch --algo flat --tokens 4 --hidden 8 --topk 1 --experts 4",
                 "dispatch has no flat algorithm");
  EXPECT_EQ(submit(cluster, "combine" + shape_args)["verified"], true);
}

// Tokens, biases and routing from .npy files, the combined tokens written back: checked against
// sums computed here. Values are small multiples of 1/16, so every sum is exact in bf16.
TEST(MoeJobs, NpyInputsRoutingAndOutputsMatchSumsComputedHere) {
  ClusterOptions options = shape(2, 2);
  options.heap_size = "64MiB";
  TestCluster cluster(options);
  const std::filesystem::path in = cluster.dir() + "/inputs", out = cluster.dir() + "/outputs";
  std::filesystem::create_directories(in);
  const int pes = 4, tokens = 5, hidden = 16, topk = 3, experts = 8;
  std::vector<std::vector<float>> x(pes), bias(pes);
  std::vector<std::vector<int64_t>> ids(pes);
  for (int pe = 0; pe < pes; ++pe) {
    const std::string suffix = "_" + std::to_string(pe) + ".npy";
    for (int i = 0; i < tokens * hidden; ++i) {
      x[pe].push_back(float((i * 5 + pe * 3) % 9 - 4) / 4);
      bias[pe].push_back(float((i + pe) % 5 - 2) / 8);
    }
    for (int t = 0; t < tokens; ++t) {  // distinct ids; the last token of PE 1 uses one slot
      for (int k = 0; k < topk; ++k) {
        ids[pe].push_back(pe == 1 && t == tokens - 1 && k > 0 ? -1 : (t + pe + 3 * k) % experts);
      }
    }
    const std::vector<float> weights(tokens * topk, 0.5f);
    write_npy_f32((in / ("x" + suffix)).string(), x[pe].data(), tokens, hidden);
    write_npy_f32((in / ("bias_0" + suffix)).string(), bias[pe].data(), tokens, hidden);
    write_npy((in / ("topk_idx" + suffix)).string(), "<i8", ids[pe].data(), tokens, topk);
    write_npy_f32((in / ("topk_weights" + suffix)).string(), weights.data(), tokens, topk);
  }
  const std::string args =
      " --tokens 5 --hidden 16 --topk 3 --experts 8 --iters 2 --verify "
      "--inputs " +
      in.string() + " --routing " + in.string();
  EXPECT_EQ(submit(cluster, "dispatch" + args)["verified"], true);
  const auto json =
      submit(cluster, "combine --weighting topk --bias 1 --output " + out.string() + args);
  ASSERT_EQ(json["verified"], true) << json.dump();
  for (int pe = 0; pe < pes; ++pe) {
    const NpyArray combined =
        read_npy((out / ("combined_x_" + std::to_string(pe) + ".npy")).string());
    ASSERT_EQ(combined.descr, "<u2");
    ASSERT_EQ(combined.rows, tokens);
    ASSERT_EQ(combined.cols, hidden);
    const uint16_t* got = reinterpret_cast<const uint16_t*>(combined.data.data());
    for (int t = 0; t < tokens; ++t) {
      for (int h = 0; h < hidden; ++h) {
        float expected = bias[pe][t * hidden + h];
        for (int k = 0; k < topk; ++k) {
          const int64_t e = ids[pe][t * topk + k];  // the stand-in expert scales by 1 + e%8 / 8
          if (e >= 0) expected += 0.5f * (1.0f + float(e % 8) / 8) * x[pe][t * hidden + h];
        }
        EXPECT_EQ(bf16_to_f32(got[t * hidden + h]), expected)
            << "PE " << pe << " token " << t << " element " << h;
      }
    }
  }

  // A token file of the wrong shape: the job fails naming it, and the daemons go on.
  write_npy_f32((in / "x_1.npy").string(), x[1].data(), hidden, tokens);
  CliRun bad = cli(target(cluster) + " submit combine" + args + " --json");
  EXPECT_NE(bad.exit_code, 0);
  const auto error = nlohmann::json::parse(bad.out)["error"].get<std::string>();
  EXPECT_NE(error.find("x_1.npy: shape (16, 5) but the job needs (5, 16)"), std::string::npos)
      << error;
  EXPECT_EQ(
      submit(cluster, "combine --tokens 8 --hidden 8 --topk 2 --experts 4 --verify")["verified"],
      true);
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
  // Larger than the 64 MiB heap: named once per PE, with what to shrink for a MoE job.
  CliRun big = cli(target(cluster) +
                   " submit combine --tokens 4096 --hidden 7168 --topk 8 --experts 64 --json");
  EXPECT_EQ(big.exit_code, 1) << big.out;
  const std::string error = nlohmann::json::parse(big.out)["error"].get<std::string>();
  EXPECT_NE(error.find("of symmetric heap"), std::string::npos) << error;
  EXPECT_NE(error.find("shrink the job (--tokens"), std::string::npos) << error;
  EXPECT_EQ(error.find("tiles"), std::string::npos) << error;
  EXPECT_EQ(error.find("PE 0: PE 0"), std::string::npos) << error;
  EXPECT_EQ(
      submit(cluster, "combine --tokens 16 --hidden 8 --topk 2 --experts 4 --verify")["verified"],
      true);
}

}  // namespace
}  // namespace symmesh::testing
