// The transport job (bench/transport.sh's figures) over tcp between two daemons: each op runs
// its rounds and names the transport it measured; signal-lat, the 8-byte signal word alone,
// refuses any other size before it runs.
#include <gtest/gtest.h>

#include "common/errors.h"
#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

wire::JobSpec transport_job(const std::string& op, uint64_t bytes, uint32_t iters) {
  wire::JobSpec spec;
  auto* job = spec.mutable_transport();
  job->set_op(wire::parse_enum<wire::TransportOp>(op, "op"));
  job->set_bytes(bytes);
  job->set_iters(iters);
  return spec;
}

TEST(TransportJob, EachOpRunsItsRoundsOverTheNamedTransport) {
  ClusterOptions options = shape(2, 1);
  options.extra_args = {"--transport", "tcp"};  // auto would take verbs where a device exists
  TestCluster cluster(options);
  for (const auto& [op, bytes] : std::vector<std::pair<std::string, uint64_t>>{
           {"put-bw", 65536}, {"put-signal-lat", 4096}, {"signal-lat", 8}}) {
    const auto result = cluster.run(transport_job(op, bytes, 20));
    ASSERT_TRUE(result.ok()) << op << ": " << result.error();
    EXPECT_EQ(result.op(), op);
    EXPECT_EQ(result.figures().transport().bytes(), bytes) << op;
    EXPECT_EQ(result.figures().transport().transport(), "tcp") << op;
    EXPECT_GT(result.figures().transport().gbps(), 0.0) << op;
    EXPECT_EQ(result.iters(), 20u) << op;
    EXPECT_GT(result.p50_us(), 0.0) << op;
    EXPECT_GE(result.p99_us(), result.p50_us()) << op;
  }
}

TEST(TransportJob, SignalLatOfAnotherSizeIsRefusedNamingTheSize) {
  TestCluster cluster(shape(2, 1));
  try {
    cluster.run(transport_job("signal-lat", 16, 20));
    FAIL() << "signal-lat --bytes 16 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("--bytes 16: signal-lat writes the 8-byte signal word"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(cluster.run(transport_job("signal-lat", 8, 5)).ok()) << "the next job runs";
}

}  // namespace
}  // namespace symmesh::testing
