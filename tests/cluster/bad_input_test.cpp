// Bad input gets the documented error and the daemon keeps serving: wrong secret, version
// and configuration mismatches at bootstrap, malformed and oversized frames, a put outside
// the heap from a peer, invalid and oversized jobs, and a peer that dies.
#include <gtest/gtest.h>

#include <fstream>

#include "common/errors.h"
#include "tests/cluster/test_cluster.h"
#include "transport/auth.h"
#include "transport/frame.h"
#include "wire/data.pb.h"

namespace symmesh::testing {
namespace {

// Waits (bounded) for a process to exit; returns its exit status.
int exit_status(DaemonProcess& daemon, std::chrono::seconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (daemon.running() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling an exit, bounded
  }
  return daemon.running() ? -100 : daemon.stop(SIGKILL);
}

ClusterOptions refused_node(std::vector<std::string> node1_args) {
  ClusterOptions options = shape(2, 1);
  options.wait_ready = false;
  options.extra_args = {"--bootstrap-timeout", "4s"};
  options.node_args[1] = std::move(node1_args);
  return options;
}

TEST(BadInput, ConfigurationMismatchIsRefusedOnBothSidesNamingTheField) {
  TestCluster cluster(refused_node({"--heap-size", "32MiB"}));
  EXPECT_NE(exit_status(cluster.daemon(1), std::chrono::seconds(30)), 0);
  EXPECT_NE(cluster.daemon(1).log().find("heap_size mismatch"), std::string::npos)
      << cluster.daemon(1).log();
  EXPECT_NE(exit_status(cluster.daemon(0), std::chrono::seconds(30)), 0);
  const std::string root = cluster.daemon(0).log();
  EXPECT_NE(root.find("heap_size mismatch"), std::string::npos) << root;
  EXPECT_NE(root.find("never joined"), std::string::npos) << root;
}

TEST(BadInput, DifferentDefaultBarrierIsRefusedAtBootstrap) {
  TestCluster cluster(refused_node({"--barrier-algo", "kary"}));
  EXPECT_NE(exit_status(cluster.daemon(1), std::chrono::seconds(30)), 0);
  EXPECT_NE(cluster.daemon(1).log().find("barrier_algo mismatch"), std::string::npos)
      << cluster.daemon(1).log();
}

TEST(BadInput, WrongSecretAtBootstrapIsRefusedOnBothSides) {
  char pattern[] = "/tmp/symmesh-secret.XXXXXX";
  const int fd = mkstemp(pattern);
  ASSERT_GE(fd, 0);
  const std::string other = "another-secret-of-enough-bytes\n";
  ASSERT_EQ(write(fd, other.data(), other.size()), ssize_t(other.size()));
  close(fd);
  TestCluster cluster(refused_node({"--secret-file", pattern}));
  EXPECT_NE(exit_status(cluster.daemon(1), std::chrono::seconds(30)), 0);
  EXPECT_NE(cluster.daemon(1).log().find("secret mismatch"), std::string::npos)
      << cluster.daemon(1).log();
  EXPECT_NE(exit_status(cluster.daemon(0), std::chrono::seconds(30)), 0);
  EXPECT_NE(cluster.daemon(0).log().find("secret mismatch"), std::string::npos)
      << cluster.daemon(0).log();
  unlink(pattern);
}

TEST(BadInput, MalformedAndOversizedControlFramesCloseOnlyThatConnection) {
  TestCluster cluster(shape(2, 1));
  const auto deadline = deadline_after(std::chrono::seconds(10));
  {
    auto channel = BlockingChannel::connect(cluster.control(0), deadline);
    authenticate_client(*channel, cluster.secret(), AuthIdentity{wire::ROLE_CONTROL, 0, 0, 0},
                        deadline);
    char prefix[4];
    write_length_prefix(5, prefix);
    channel->write_raw(std::string(prefix, 4) + "\xff\xff\xff\xff\xff", deadline);
    wire::ClientResponse response;
    EXPECT_THROW(channel->read(response, deadline), PeerError);
  }
  {
    auto channel = BlockingChannel::connect(cluster.control(0), deadline);
    authenticate_client(*channel, cluster.secret(), AuthIdentity{wire::ROLE_CONTROL, 0, 0, 0},
                        deadline);
    char prefix[4];
    write_length_prefix(kMaxMessageFrame + 1, prefix);
    channel->write_raw(std::string(prefix, 4), deadline);
    wire::ClientResponse response;
    EXPECT_THROW(channel->read(response, deadline), PeerError);
  }
  EXPECT_TRUE(cluster.run(barrier_job("pull", 5)).ok());
}

TEST(BadInput, PutOutsideTheHeapFromAPeerIsRefusedAndLogged) {
  TestCluster cluster(shape(2, 1));
  const auto status = cluster.client(0)->status(deadline_after(std::chrono::seconds(10)));
  ASSERT_EQ(status.peer_size(), 1);
  const HostPort data = parse_host_port(status.peer(0).data_endpoint(), "data endpoint");
  const auto deadline = deadline_after(std::chrono::seconds(10));
  auto channel = BlockingChannel::connect(data, deadline);
  authenticate_client(*channel, cluster.secret(), AuthIdentity{wire::ROLE_DATA, 0, 0, 9}, deadline);
  wire::DataHeader header;
  header.set_kind(wire::PUT);
  header.set_offset(uint64_t{1} << 40);
  header.set_length(64);
  channel->write(header, deadline);
  wire::DataHeader ignored;
  EXPECT_THROW(channel->read(ignored, deadline), PeerError);
  const std::string log = cluster.daemon(1).log();
  EXPECT_NE(log.find("PUT refused"), std::string::npos) << log;
  EXPECT_NE(log.find("outside the segment"), std::string::npos) << log;
  const auto result = cluster.run(collective_job("allreduce", 4096, "f32", "ring"));
  EXPECT_TRUE(result.ok()) << result.error();
  EXPECT_TRUE(result.verified());
}

TEST(BadInput, InvalidAndOversizedJobsFailAndTheNextJobRuns) {
  TestCluster cluster(shape(2, 2));
  // Refused before they run, as the request's fault (InvalidArgument: the CLI exits 2).
  const auto refusal = [&](const wire::JobSpec& spec, int via_node) -> std::string {
    try {
      cluster.run(spec, via_node);
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "not refused";
  };
  const std::string bad = refusal(collective_job("allreduce", 4003, "f32", "ring"), 0);
  EXPECT_NE(bad.find("--bytes 4003"), std::string::npos) << bad;
  // A number the enum does not name (a newer peer's, or garbage), relayed through node 1.
  wire::JobSpec unknown_algo = collective_job("allreduce", 4096, "f32", "ring");
  unknown_algo.mutable_collective()->set_algo(wire::CollectiveAlgo(9));
  const std::string unknown = refusal(unknown_algo, 1);
  EXPECT_NE(unknown.find("--algo is 9; allowed: auto, ring, hier, direct"), std::string::npos)
      << unknown;
  const std::string direct = refusal(collective_job("allreduce", 4096, "f32", "direct"), 0);
  EXPECT_NE(direct.find("allowed here: ring, hier, auto"), std::string::npos) << direct;
  // Larger than the heap: refused by the symmetric allocator with sizes, on every PE.
  auto huge = cluster.run(collective_job("allreduce", uint64_t{1} << 30, "f32", "hier"));
  EXPECT_FALSE(huge.ok());
  EXPECT_NE(huge.error().find("symmetric heap exhausted"), std::string::npos) << huge.error();
  EXPECT_NE(huge.error().find("asked 1.0 GiB"), std::string::npos) << huge.error();
  auto good = cluster.run(collective_job("allreduce", 1 << 20, "f32", "hier"));
  EXPECT_TRUE(good.ok()) << good.error();
  EXPECT_TRUE(good.verified());
  const auto status = cluster.client(1)->status(deadline_after(std::chrono::seconds(10)));
  EXPECT_EQ(status.heap_used(), 0u) << "a failed job must give its heap back";
}

TEST(BadInput, ADeadPeerFailsTheNextJobNamingItAndTheRootKeepsServing) {
  TestCluster cluster(shape(3, 1));
  ASSERT_TRUE(cluster.run(barrier_job("pull", 5)).ok());
  cluster.daemon(2).stop(SIGKILL);
  const auto start = Clock::now();
  // Refused at once once the root knows (a job needs every node), or failed naming it when
  // it ran before the root knew.
  std::string error;
  try {
    const auto result = cluster.run(barrier_job("dissemination", 5));
    EXPECT_FALSE(result.ok());
    error = result.error();
  } catch (const PeerError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("node 2"), std::string::npos) << error;
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(15)) << "must fail within the deadline";
  const auto status = cluster.client(0)->status(deadline_after(std::chrono::seconds(10)));
  EXPECT_EQ(wire::enum_text(status.state()), "degraded");
  for (const auto& peer : status.peer()) EXPECT_EQ(peer.up(), peer.node_rank() != 2);
}

}  // namespace
}  // namespace symmesh::testing
