// The Python module on a local cluster (2 nodes x 2 PEs, tcp between them), one process per PE
// under symmesh launch: every call of its API (tests/python/api_test.py), and the MoE layer
// example trained for a few steps, whose output and gradients must match the same layer run
// in one process (examples/moe_layer.py). And torch.distributed on the symmesh backend from
// processes torch.multiprocessing.spawn started (tests/python/distributed_test.py), on 2 x 2 and
// on one node of 4, a DDP training loop that ends where gloo's does (examples/ddp_train.py), and
// DeepEP's API with DeepEP's own checks (tests/python/deep_ep_test.py).
#include <gtest/gtest.h>

#include <future>

#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

// `symmesh launch -- python3 SCRIPT ARGS` on every node at once; each node's run.
std::vector<CliRun> launch_python(TestCluster& cluster, const std::string& script) {
  return launch_on_every_node(cluster, std::string("env PYTHONPATH=") + SYMMESH_PYTHON_DIR +
                                           " /usr/bin/python3 " + SYMMESH_SOURCE_DIR + "/" +
                                           script);
}

void expect_every_rank_says(const std::vector<CliRun>& runs, const std::string& said) {
  for (int node = 0; node < 2; ++node) {
    EXPECT_EQ(runs[node].exit_code, 0) << runs[node].out;
    for (int local = 0; local < 2; ++local) {
      const int rank = node * 2 + local;
      const std::string line =
          "[rank " + std::to_string(rank) + "] " +
          std::string(said).replace(said.find("RANK"), 4, std::to_string(rank));
      EXPECT_NE(runs[node].out.find(line), std::string::npos) << line << " in:\n" << runs[node].out;
    }
  }
}

TEST(Python, EveryCallOfTheApiWorksOnNumpyAndTorchAndWrongCallsRaiseValueError) {
  TestCluster cluster(shape(2, 2));
  expect_every_rank_says(launch_python(cluster, "tests/python/api_test.py"),
                         "api_test: rank RANK of 4: every check passed");
}

TEST(Python, TheMoeLayerTrainsLikeTheSingleProcessLayerForwardAndBackward) {
  TestCluster cluster(shape(2, 2));
  expect_every_rank_says(launch_python(cluster, "examples/moe_layer.py --steps 3"),
                         "moe_layer: rank RANK of 4: 3 steps forward and backward (float32) "
                         "match the single-process layer");
}

// `python3 SCRIPT ARGS` as a program started by hand on this host: it finds the cluster through
// SYMMESH_DAEMON and SYMMESH_SECRET_FILE.
CliRun run_python(TestCluster& cluster, const std::string& script) {
  return shell("env PYTHONPATH=" + std::string(SYMMESH_PYTHON_DIR) + " SYMMESH_DAEMON=" +
               cluster.control(0).str() + " SYMMESH_SECRET_FILE=" + cluster.secret_file() +
               " /usr/bin/python3 " + SYMMESH_SOURCE_DIR + "/" + script);
}

// A spawned test program (`program`: its name) passed on every one of its `world` ranks.
void expect_every_spawned_rank_passed(const CliRun& run, const std::string& program, int world) {
  EXPECT_EQ(run.exit_code, 0) << run.out;
  for (int rank = 0; rank < world; ++rank) {
    const std::string line = program + ": rank " + std::to_string(rank) + " of " +
                             std::to_string(world) + ": every check passed";
    EXPECT_NE(run.out.find(line), std::string::npos) << line << " in:\n" << run.out;
  }
}

TEST(Python, TorchDistributedOnTheSymmeshBackendMatchesItsReferenceAcrossNodes) {
  TestCluster cluster(shape(2, 2));
  expect_every_spawned_rank_passed(run_python(cluster, "tests/python/distributed_test.py 4"),
                                   "distributed_test", 4);
}

TEST(Python, TorchDistributedOnTheSymmeshBackendMatchesItsReferenceOnOneNode) {
  TestCluster cluster(shape(1, 4));
  expect_every_spawned_rank_passed(run_python(cluster, "tests/python/distributed_test.py 4"),
                                   "distributed_test", 4);
}

TEST(Python, TheMoeLayerTrainsThroughDeepEpsApiLikeTheSingleProcessLayer) {
  TestCluster cluster(shape(2, 2));
  // torch's rendezvous for init_process_group, at a port nothing else here holds.
  const std::string store = "env MASTER_PORT=" + std::to_string(free_port()) + " ";
  const auto runs = launch_on_every_node(
      cluster, store + "env PYTHONPATH=" + SYMMESH_PYTHON_DIR + " /usr/bin/python3 " +
                   SYMMESH_SOURCE_DIR + "/examples/moe_layer.py --steps 3 --api deep_ep");
  expect_every_rank_says(runs,
                         "moe_layer: rank RANK of 4: 3 steps forward and backward (float32) "
                         "match the single-process layer");
}

TEST(Python, DeepEpsApiPassesDeepEpsOwnChecksAcrossNodes) {
  TestCluster cluster(shape(2, 2));
  expect_every_spawned_rank_passed(run_python(cluster, "tests/python/deep_ep_test.py 4 2"),
                                   "deep_ep_test", 4);
}

TEST(Python, DeepEpsApiPassesDeepEpsOwnChecksOnOneNode) {
  TestCluster cluster(shape(1, 4));
  expect_every_spawned_rank_passed(run_python(cluster, "tests/python/deep_ep_test.py 4 4"),
                                   "deep_ep_test", 4);
}

TEST(Python, DdpTrainsToTheSameParametersOnSymmeshAsOnGloo) {
  TestCluster cluster(shape(2, 2));
  const CliRun run = run_python(cluster, "examples/ddp_train.py --compare --steps 50");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("parameters of gloo and symmesh differ by at most"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("agree within 1e-5"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace symmesh::testing
