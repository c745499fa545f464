// The verbs transport on a real (soft-RoCE) device, beyond what the shared Rma suite checks:
// splitting above the message limit, many back-to-back signals, a send queue and a bounce
// ring far smaller than the traffic, bounds errors, one deadline for a whole put and its end at
// an abort, and a failed work completion.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>

#include "runtime/barrier.h"
#include "tests/support/local_cluster.h"
#include "transport/verbs/verbs_transport.h"

namespace symmesh {
namespace {

LocalClusterOptions verbs_cluster(int ranks = 1) {
  LocalClusterOptions o;
  o.nodes = 2;
  o.ranks_per_node = ranks;
  o.heap_size = size_t(ranks) * (32 << 20);
  o.wait_timeout = std::chrono::seconds(60);
  o.transport = "verbs";
  return o;
}

VerbsTransport& verbs_of(LocalCluster& cluster, int node) {
  return dynamic_cast<VerbsTransport&>(cluster.verbs(node));
}

TEST(Verbs, DeviceAndGidAreChosenAutomatically) {
  LocalCluster cluster(verbs_cluster());
  const VerbsDevice& device = verbs_of(cluster, 0).device();
  EXPECT_FALSE(device.name().empty());
  if (device.ethernet()) {
    EXPECT_NE(device.gid_index(), 0) << "index 0 is link-local on RoCE: " << device.describe();
    EXPECT_NE(gid_text(device.gid()).rfind("fe80", 0), 0u) << device.describe();
  }
  EXPECT_EQ(cluster.node(0).transport_name(1), "verbs");
  EXPECT_TRUE(cluster.verbs(0).peer_up(1));
}

TEST(Verbs, WritesAboveTheMessageLimitAreSplit) {
  for (size_t limit : {size_t{0}, size_t{4096}}) {  // the device's (8 MiB on rxe), and tiny
    LocalClusterOptions o = verbs_cluster();
    o.verbs.max_message = limit;
    LocalCluster cluster(o);
    const uint64_t max_msg = verbs_of(cluster, 0).device().max_msg_sz();
    cluster.run([&](Pe& pe) {
      const size_t bytes = limit ? 100'000 + 12 : max_msg + 4096 + 12;
      auto* inbox = static_cast<uint32_t*>(pe.malloc(bytes));
      barrier_all(pe);
      std::vector<uint32_t> data(bytes / 4);
      std::iota(data.begin(), data.end(), uint32_t(pe.my_pe() << 28));
      pe.put(inbox, data.data(), bytes, 1 - pe.my_pe());
      pe.quiet();
      barrier_all(pe);
      const uint32_t from = uint32_t((1 - pe.my_pe()) << 28);
      for (size_t i = 0; i < data.size(); i += 1021) ASSERT_EQ(inbox[i], from + i) << i;
      ASSERT_EQ(inbox[data.size() - 1], from + data.size() - 1);
      std::vector<uint32_t> back(data.size());
      pe.get(back.data(), inbox, bytes, 1 - pe.my_pe());
      EXPECT_EQ(back, data);
      barrier_all(pe);
    });
  }
}

// Both ways of draining completions: the posting PE alone, and the node's progress thread.
class VerbsProgress : public ::testing::TestWithParam<bool> {};

TEST_P(VerbsProgress, ThousandsOfBackToBackSignalsEachTrailTheirData) {
  LocalClusterOptions o = verbs_cluster();
  o.verbs.progress_thread = GetParam();
  o.verbs.send_depth = 64;  // far fewer slots than requests in flight
  o.verbs.signal_interval = 16;
  o.verbs.bounce_bytes = 16 << 10;  // and a ring that must be recycled many times
  LocalCluster cluster(o);
  cluster.run([](Pe& pe) {
    constexpr int kSignals = 3000;
    constexpr size_t kWords = 256;  // 1 KiB: staged, not inlined
    auto* inbox = pe.malloc_array<uint32_t>(kWords * kSignals);
    auto* counter = pe.malloc_array<uint64_t>(1);
    auto* last = pe.malloc_array<uint64_t>(1);
    *counter = 0;
    *last = 0;
    barrier_all(pe);
    const int to = 1 - pe.my_pe();
    std::vector<uint32_t> block(kWords);
    for (int i = 0; i < kSignals; ++i) {
      std::fill(block.begin(), block.end(), uint32_t(i + 1));
      const SignalOp op = i % 2 ? SignalOp::kAdd : SignalOp::kSet;
      uint64_t* word = op == SignalOp::kAdd ? counter : last;
      pe.put_signal(inbox + kWords * i, block.data(), kWords * 4, word,
                    op == SignalOp::kAdd ? 1 : uint64_t(i + 1), op, to);
    }
    pe.signal_wait_until(counter, Cmp::kGe, uint64_t(kSignals / 2));
    pe.signal_wait_until(last, Cmp::kGe, uint64_t(kSignals - 1));
    for (int i = 0; i < kSignals; ++i) {
      ASSERT_EQ(inbox[kWords * i], uint32_t(i + 1)) << i;
      ASSERT_EQ(inbox[kWords * i + kWords - 1], uint32_t(i + 1)) << i;
    }
    barrier_all(pe);
  });
}

INSTANTIATE_TEST_SUITE_P(Drain, VerbsProgress, ::testing::Bool(), [](const auto& info) {
  return std::string(info.param ? "ProgressThread" : "PostingPe");
});

TEST(Verbs, OutOfBoundsAndMisalignedAreRefusedBeforePosting) {
  LocalCluster cluster(verbs_cluster());
  const size_t segment = cluster.node(1).segment().size;
  VerbsTransport& verbs = verbs_of(cluster, 0);
  const uint64_t value = 7;
  try {
    verbs.put(0, 1, segment - 4, &value, 8, nullptr);
    FAIL() << "expected a bounds error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("node 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(verbs.atomic_add(0, 1, 12, 1), InvalidArgument);
  uint64_t out = 0;
  EXPECT_THROW(verbs.get(0, 1, segment, &out, 8), InvalidArgument);
  SignalUpdate misaligned{4, 1, SignalOp::kSet};
  EXPECT_THROW(verbs.put(0, 1, 0, &value, 8, &misaligned), InvalidArgument);
  EXPECT_THROW(verbs.put(0, 2, 0, &value, 8, nullptr), InvalidArgument) << "no node 2";
  // Nothing was posted, so the queue pairs are healthy.
  verbs.put(0, 1, segment - 8, &value, 8, nullptr);
  verbs.quiet(0);
  EXPECT_EQ(verbs.atomic_fetch_add(0, 1, segment - 8, 1), 7u);
  EXPECT_TRUE(verbs.peer_up(1));
}

// Two nodes of one rank joined by verbs, with room for a put of `put_bytes` and 8 KiB after it.
struct TwoVerbsNodes {
  static NodeConfig config(int rank, size_t put_bytes) {
    NodeConfig c;
    c.nodes = 2;
    c.node_rank = rank;
    c.heap_size = put_bytes + (1 << 20);  // the segments are symmetric
    return c;
  }
  TwoVerbsNodes(size_t put_bytes, const VerbsOptions& options)
      : rows_offset(put_bytes + 4096),
        node0(config(0, put_bytes)),
        node1(config(1, put_bytes)),
        verbs0(0, 2, 1, node0.segment(), node0.doorbell(), options),
        verbs1(1, 2, 1, node1.segment(), node1.doorbell(), options) {
    verbs0.connect(1, verbs1.local_info());
    verbs1.connect(0, verbs0.local_info());
  }
  // A quiet of node 0's PE, retried while it times out (op_timeout may be tiny), bounded.
  bool quiet_eventually() {
    const auto give_up = deadline_after(std::chrono::seconds(60));
    for (int attempt = 0; attempt < 3000 && Clock::now() < give_up; ++attempt) {
      try {
        verbs0.quiet(0);
        return true;
      } catch (const TimeoutError&) {
      }
    }
    return false;
  }
  // After an operation that failed part way: once drained, the pair carries 8 KiB, two writes
  // through the bounce ring (too large to inline) that need no wait once it is empty, so a tiny
  // op_timeout cannot fail them.
  void serves_again() {
    ASSERT_TRUE(quiet_eventually()) << "the posted writes never drained";
    EXPECT_TRUE(verbs0.peer_up(1));
    std::iota(sent.begin(), sent.end(), 0x5eed0000u);
    verbs0.put(0, 1, rows_offset, sent.data(), sent.size() * sizeof(uint32_t), nullptr);
    ASSERT_TRUE(quiet_eventually());
    EXPECT_EQ(std::memcmp(node1.segment().base + rows_offset, sent.data(),
                          sent.size() * sizeof(uint32_t)),
              0);
  }

  std::vector<uint32_t> sent = std::vector<uint32_t>(2048);
  const uint64_t rows_offset;
  Node node0, node1;
  VerbsTransport verbs0, verbs1;
};

// A put of 128 MiB cut into 32768 writes of 4 KiB (above any device's inline size) through a
// ring of four: it waits for a completion every four writes, each wait far shorter than any
// op_timeout, and 8192 round trips and 128 MiB of copies take far more than 5 ms on any device.
constexpr size_t kLongPut = size_t{128} << 20;
VerbsOptions long_put_options(std::chrono::milliseconds op_timeout) {
  VerbsOptions options;
  options.bounce_bytes = 16 << 10;
  options.op_timeout = op_timeout;
  return options;
}

// One deadline bounds a whole put, however many writes it is cut into: a node peer that lent
// the put its source waits a bounded time. The long put ends with a named timeout.
TEST(Verbs, APutCutIntoManyWritesEndsWithinOneOperationTimeout) {
  TwoVerbsNodes pair(kLongPut, long_put_options(std::chrono::milliseconds(5)));
  try {
    pair.verbs0.put(0, 1, 0, pair.node0.segment().base, kLongPut, nullptr);
    FAIL() << "128 MiB in 4 KiB writes crossed the device within 5 ms";
  } catch (const TimeoutError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("a put of " + std::to_string(kLongPut) + " bytes to node 1 had posted"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("op_timeout 5 ms"), std::string::npos) << message;
  }
  pair.serves_again();
}

// An aborted node's put stops at its next wait instead of running to its end: everything it
// posted is in the bounce ring, so nothing in flight needs the caller's memory. So does a get.
TEST(Verbs, APutStopsAtItsNextWaitOnceTheNodeIsAborted) {
  TwoVerbsNodes pair(kLongPut, long_put_options(std::chrono::seconds(60)));
  pair.node0.doorbell().abort("the job failed on PE 3");
  try {
    pair.verbs0.put(0, 1, 0, pair.node0.segment().base, kLongPut, nullptr);
    FAIL() << "the put ran to its end on an aborted node";
  } catch (const AbortedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("a put of " + std::to_string(kLongPut) +
                           " bytes to node 1 stopped after posting"),
              std::string::npos)
        << message;
    EXPECT_NE(message.find("the node was aborted: the job failed on PE 3"), std::string::npos)
        << message;
  }
  // A read waits for its data in the bounce ring: it stops too, and its ring space stays held
  // until the device is done with it.
  std::vector<std::byte> out(64 << 10);
  EXPECT_THROW(pair.verbs0.get(0, 1, 0, out.data(), out.size()), AbortedError);
  // The drain between jobs is not cut short by an abort (a peer going down aborts the node
  // while it drains): what was posted completes.
  EXPECT_NO_THROW(pair.verbs0.flush_all(deadline_after(std::chrono::seconds(60))));
  pair.node0.doorbell().clear_abort();
  pair.serves_again();
  std::vector<uint32_t> back(pair.sent.size());  // with a 60 s timeout, a read back is safe
  pair.verbs0.get(0, 1, pair.rows_offset, back.data(), back.size() * sizeof(uint32_t));
  EXPECT_EQ(back, pair.sent);
}

// A peer whose memory key no longer matches (as after it re-registered or restarted): the
// device refuses the write, and that first failed completion names everything needed. As in
// the daemon, the peer's going down aborts the node: the waits that collect the cause are not
// cut short by that abort.
TEST(Verbs, AFailedCompletionNamesItselfAndTheQueuePairIsNeverReused) {
  NodeConfig config;
  config.nodes = 2;
  config.heap_size = 16 << 20;
  Node node0(config);
  config.node_rank = 1;
  Node node1(config);
  VerbsOptions options;
  options.op_timeout = std::chrono::seconds(60);
  VerbsTransport verbs0(0, 2, 1, node0.segment(), node0.doorbell(), options);
  VerbsTransport verbs1(1, 2, 1, node1.segment(), node1.doorbell(), options);
  wire::VerbsInfo stale = verbs1.local_info();
  stale.set_rkey(stale.rkey() ^ 0x5a5a00);
  verbs0.connect(1, stale);
  verbs1.connect(0, verbs0.local_info());
  // The callback may run on the notifier thread: the report is handed over under a lock.
  std::mutex report_mutex;
  std::condition_variable report_arrived;
  std::string reported;
  verbs0.on_peer_down([&](int node, const std::string& why) {
    node0.doorbell().abort("node " + std::to_string(node) + " is down: " + why);
    std::lock_guard lock(report_mutex);
    if (node == 1) reported = why;
    report_arrived.notify_all();
  });
  const uint64_t value = 5;
  try {
    for (int i = 0; i < 8; ++i) verbs0.put(0, 1, 4096, &value, 8, nullptr);
    verbs0.quiet(0);
    FAIL() << "expected the refused writes to fail the quiet";
  } catch (const PeerError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("work completion failed: remote access error"), std::string::npos)
        << message;
    EXPECT_NE(message.find("opcode RDMA_WRITE"), std::string::npos) << message;
    EXPECT_NE(message.find("node 1"), std::string::npos) << message;
    EXPECT_NE(message.find("QP "), std::string::npos) << message;
  }
  EXPECT_FALSE(verbs0.peer_up(1));
  EXPECT_NE(verbs0.peer_down_reason(1).find("remote access error"), std::string::npos);
  // The callback fires once, with whichever side saw the QP fail first (the notifier may see
  // its receives flushed before the sender sees the cause); the reason kept is the cause.
  {
    std::unique_lock lock(report_mutex);
    ASSERT_TRUE(
        report_arrived.wait_for(lock, std::chrono::seconds(60), [&] { return !reported.empty(); }));
    EXPECT_NE(reported.find("QP "), std::string::npos) << reported;
  }
  // Later operations fail at once, naming the first failure: the QP is not reused.
  try {
    verbs0.put(0, 1, 4096, &value, 8, nullptr);
    FAIL() << "a down peer must not be written to";
  } catch (const PeerError& e) {
    EXPECT_NE(std::string(e.what()).find("is down: work completion failed"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace symmesh
