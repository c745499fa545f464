// The receiving side of the tcp transport refuses what a peer must not do: every frame is
// checked before a byte is written, and a violating connection is closed while the node
// goes on serving its real peers.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <future>

#include "runtime/barrier.h"
#include "tests/support/local_cluster.h"
#include "transport/auth.h"
#include "transport/frame.h"

namespace symmesh {
namespace {

LocalClusterOptions two_nodes() {
  LocalClusterOptions o;
  o.nodes = 2;
  o.ranks_per_node = 1;
  o.heap_size = 16 << 20;
  o.wait_timeout = std::chrono::seconds(20);
  return o;
}

// A data connection to `node` that claims to be node 0's extra connection.
std::unique_ptr<BlockingChannel> rogue_connection(LocalCluster& cluster, int node) {
  auto channel = BlockingChannel::connect(cluster.tcp(node).listening_on(),
                                          deadline_after(std::chrono::seconds(10)));
  authenticate_client(*channel, "local-cluster", AuthIdentity{wire::ROLE_DATA, 0, 0, 7},
                      deadline_after(std::chrono::seconds(10)));
  return channel;
}

// True when the daemon side closed the connection.
bool closed_by_peer(BlockingChannel& channel) {
  wire::DataHeader ignored;
  try {
    channel.read(ignored, deadline_after(std::chrono::seconds(10)));
  } catch (const PeerError& e) {
    return std::string(e.what()).find("closed") != std::string::npos ||
           std::string(e.what()).find("reset") != std::string::npos;
  }
  return false;
}

void cluster_still_works(LocalCluster& cluster) {
  cluster.run([](Pe& pe) {
    auto* word = pe.malloc_array<uint64_t>(1);
    *word = 0;
    barrier_all(pe);
    const uint64_t value = 42 + pe.my_pe();
    pe.put(word, &value, 8, 1 - pe.my_pe());
    pe.quiet();
    barrier_all(pe);
    EXPECT_EQ(*word, uint64_t(42 + 1 - pe.my_pe()));
  });
}

TEST(TcpTransport, PutOutsideTheSegmentClosesOnlyThatConnection) {
  LocalCluster cluster(two_nodes());
  const size_t segment = cluster.node(1).segment().size;
  const uint64_t canary_offset = segment - 8;
  auto* canary = reinterpret_cast<uint64_t*>(cluster.node(1).segment().base + canary_offset);
  *canary = 0x1234;
  auto channel = rogue_connection(cluster, 1);
  wire::DataHeader header;
  header.set_kind(wire::PUT);
  header.set_offset(canary_offset);
  header.set_length(4096);  // runs past the end
  channel->write(header, deadline_after(std::chrono::seconds(10)));
  channel->write_raw(std::string(4096, 'x'), deadline_after(std::chrono::seconds(10)));
  EXPECT_TRUE(closed_by_peer(*channel));
  EXPECT_EQ(*canary, 0x1234u) << "no byte may be written before the bounds check";
  EXPECT_TRUE(cluster.tcp(1).peer_up(0));
  cluster_still_works(cluster);
}

TEST(TcpTransport, SignalOutsideTheSegmentOrMisalignedIsRefused) {
  LocalCluster cluster(two_nodes());
  for (uint64_t signal_offset : {uint64_t{1} << 40, uint64_t{12}}) {
    auto channel = rogue_connection(cluster, 1);
    wire::DataHeader header;
    header.set_kind(wire::PUT);
    header.set_has_signal(true);
    header.set_signal_offset(signal_offset);
    channel->write(header, deadline_after(std::chrono::seconds(10)));
    EXPECT_TRUE(closed_by_peer(*channel)) << signal_offset;
  }
  cluster_still_works(cluster);
}

TEST(TcpTransport, MalformedAndOversizedHeadersAreRefused) {
  LocalCluster cluster(two_nodes());
  {
    auto channel = rogue_connection(cluster, 1);
    char prefix[4];
    write_length_prefix(6, prefix);
    channel->write_raw(std::string(prefix, 4) + "\xff\xff\xff\xff\xff\xff",
                       deadline_after(std::chrono::seconds(10)));
    EXPECT_TRUE(closed_by_peer(*channel));
  }
  {
    auto channel = rogue_connection(cluster, 1);
    char prefix[4];
    write_length_prefix(kMaxDataHeader + 1, prefix);
    channel->write_raw(std::string(prefix, 4), deadline_after(std::chrono::seconds(10)));
    EXPECT_TRUE(closed_by_peer(*channel));
  }
  cluster_still_works(cluster);
}

TEST(TcpTransport, WrongSecretNeverGetsADataConnection) {
  LocalCluster cluster(two_nodes());
  auto channel = BlockingChannel::connect(cluster.tcp(1).listening_on(),
                                          deadline_after(std::chrono::seconds(10)));
  EXPECT_THROW(
      authenticate_client(*channel, "not-the-secret", AuthIdentity{wire::ROLE_DATA, 0, 0, 0},
                          deadline_after(std::chrono::seconds(10))),
      AuthError);
  cluster_still_works(cluster);
}

// While PEs poll, small frames wake no io thread (the receive marks are raised). A node whose
// PEs then stop waiting (they compute, or block on something else) must still answer: its
// tick lowers the marks and its io threads read the request.
TEST(TcpTransport, ANodeWhosePesStoppedWaitingStillServesAGet) {
  LocalCluster cluster(two_nodes());
  std::promise<void> served;
  auto served_future = served.get_future();
  cluster.run([&](Pe& pe) {
    auto* word = pe.malloc_array<uint64_t>(1);
    *word = 1000 + pe.my_pe();
    for (int i = 0; i < 50; ++i) barrier_all(pe);  // polling waits: the marks go up
    if (pe.my_pe() == 1) {
      // Not a wait of the runtime: this PE polls nothing until node 0 got its answer.
      EXPECT_EQ(served_future.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    } else {
      for (int i = 0; i < 20; ++i) {
        uint64_t seen = 0;
        pe.get(&seen, word, sizeof(seen), 1);
        EXPECT_EQ(seen, 1001u);
      }
      served.set_value();
    }
    barrier_all(pe);
  });
}

// Two nodes of one PE striping puts of `threshold` bytes or more over `connections`
// connections, read by one io thread.
LocalClusterOptions striping(int connections, size_t threshold) {
  LocalClusterOptions o = two_nodes();
  o.tcp.connections_per_peer = connections;
  o.tcp.stripe_threshold = threshold;
  o.tcp.io_threads = 1;
  return o;
}

// `rounds` rounds from PE `from` to PE `to` on the other node: `from` runs send(r) and a
// quiet, then `to` runs check(r), with everything sent applied; the next round starts once
// `to` has checked. The other PEs only meet in the barriers.
void rounds_checked_at_target(Pe& pe, int from, int to, uint64_t rounds,
                              const std::function<void(uint64_t)>& send,
                              const std::function<void(uint64_t)>& check) {
  auto* applied = pe.malloc_array<uint64_t>(1);  // at `to`: the round's puts are in
  auto* checked = pe.malloc_array<uint64_t>(1);  // at `from`: `to` checked the round
  *applied = *checked = 0;
  barrier_all(pe);
  for (uint64_t round = 1; round <= rounds; ++round) {
    if (pe.my_pe() == from) {
      send(round);
      pe.quiet();
      pe.signal_set(applied, round, to);
      pe.signal_wait_until(checked, Cmp::kEq, round);
    } else if (pe.my_pe() == to) {
      pe.signal_wait_until(applied, Cmp::kEq, round);
      check(round);
      pe.signal_set(checked, round, from);
    }
  }
  barrier_all(pe);
}

// Two puts from `from` to `to` a round, `first` then `second` bytes, the first setting a
// signal to 2r - 1 and the second to 2r: the signal must read 2r, however each put was cut
// into stripes.
void older_signal_never_lands_last(const LocalClusterOptions& options, int from, int to,
                                   size_t first, size_t second, uint64_t rounds) {
  LocalCluster cluster(options);
  cluster.run([&](Pe& pe) {
    auto* inbox = static_cast<std::byte*>(pe.malloc(first + second));
    auto* signal = pe.malloc_array<uint64_t>(1);
    *signal = 0;
    std::vector<std::byte> data(std::max(first, second));
    rounds_checked_at_target(
        pe, from, to, rounds,
        [&](uint64_t round) {
          pe.put_signal(inbox, data.data(), first, signal, 2 * round - 1, SignalOp::kSet, to);
          pe.put_signal(inbox + first, data.data(), second, signal, 2 * round, SignalOp::kSet, to);
        },
        [&](uint64_t round) {
          EXPECT_EQ(pe.signal_fetch(signal), 2 * round) << "the older put's signal landed last";
        });
  });
}

// A striped put whose length fills fewer stripes than there are connections leaves the
// others free to still carry an earlier put's stripe. Four connections, striping from 16 KiB:
// a 20 KiB put fills three stripes, after a 4 MiB put on all four.
TEST(TcpTransport, AStripedPutOverFewerConnectionsStaysBehindAnEarlierOne) {
  older_signal_never_lands_last(striping(4, 16 << 10), 0, 1, 4 << 20, 20 << 10, 100);
}

// A short striped put must also stay behind an earlier operation on its PE's home connection
// (local rank 1: connection 1 of 2). Striping from 4 KiB, a 4 KiB put is one stripe, which
// must go on that connection too.
TEST(TcpTransport, AShortStripedPutStaysBehindAnEarlierPutOnTheHomeConnection) {
  LocalClusterOptions o = striping(2, 4 << 10);
  o.ranks_per_node = 2;
  o.heap_size = 32 << 20;
  older_signal_never_lands_last(o, 1, 3, 1 << 10, 4 << 10, 1000);
}

// Striping from 1 byte over 3 connections: a put shorter than the connection count (its
// stripe length once came out as zero) still lands, and so does a signal with no data after it.
TEST(TcpTransport, PutsShorterThanTheConnectionCountLandUnderAOneByteStripeThreshold) {
  LocalCluster cluster(striping(3, 1));
  cluster.run([](Pe& pe) {
    auto* inbox = pe.malloc_array<uint8_t>(8);
    auto* signal = pe.malloc_array<uint64_t>(1);
    std::fill(inbox, inbox + 8, uint8_t(0));
    *signal = 0;
    barrier_all(pe);
    const int other = 1 - pe.my_pe();
    const uint8_t bytes[2] = {7, 9};
    pe.put_signal(inbox, bytes, 2, signal, 1, SignalOp::kAdd, other);
    pe.signal_add(signal, 1, other);
    pe.signal_wait_until(signal, Cmp::kEq, 2);
    EXPECT_EQ(inbox[0], 7);
    EXPECT_EQ(inbox[1], 9);
    barrier_all(pe);
  });
}

// OpenSHMEM's fence: a put, fence, then a striped put over the same bytes leaves the striped
// put's data there, though its stripe on the other connection could land first without it.
TEST(TcpTransport, FenceOrdersAnEarlierPutsDataBeforeAStripedPutsOverTheSameBytes) {
  LocalCluster cluster(striping(2, 1 << 20));
  // Words: the striped put's halves are 1 MiB; the plain put covers all of the second but
  // its last page, and stays under the stripe threshold.
  constexpr size_t kStriped = (2 << 20) / 4, kHalf = kStriped / 2, kPlain = kHalf - 1024;
  constexpr uint64_t kRounds = 300;
  cluster.run([&](Pe& pe) {
    auto* inbox = pe.malloc_array<uint32_t>(kStriped);
    std::vector<uint32_t> older(kPlain), newer(kStriped);
    rounds_checked_at_target(
        pe, 0, 1, kRounds,
        [&](uint64_t round) {
          std::fill(older.begin(), older.end(), uint32_t(2 * round - 1));
          std::fill(newer.begin(), newer.end(), uint32_t(2 * round));
          pe.put(inbox + kHalf, older.data(), kPlain * 4, 1);  // the home connection
          pe.fence();
          pe.put(inbox, newer.data(), kStriped * 4, 1);  // its second half on the other one
        },
        [&](uint64_t round) {
          const auto stale =
              std::count(inbox + kHalf, inbox + kHalf + kPlain, uint32_t(2 * round - 1));
          EXPECT_EQ(stale, 0) << "round " << round << ": the older put's words landed last";
        });
  });
}

}  // namespace
}  // namespace symmesh
