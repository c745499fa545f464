// One-sided operations on every transport: parameterised over cluster shapes so that each
// op runs over shm (same node) and tcp (other nodes), with small and striped sizes. The
// soft-RoCE suite compiles this file again with SYMMESH_RMA_TRANSPORT="verbs", so every op
// also runs over RDMA there (tests/softroce/).
#include <gtest/gtest.h>

#include <barrier>
#include <functional>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "runtime/barrier.h"
#include "tests/support/local_cluster.h"

#ifndef SYMMESH_RMA_TRANSPORT
#define SYMMESH_RMA_TRANSPORT "tcp"
#endif

namespace symmesh {
namespace {

struct Shape {
  int nodes;
  int ranks;
};

class Rma : public ::testing::TestWithParam<Shape> {
 protected:
  static LocalClusterOptions options(Shape shape) {
    LocalClusterOptions o;
    o.nodes = shape.nodes;
    o.ranks_per_node = shape.ranks;
    o.heap_size = size_t(shape.ranks) * (24 << 20);
    o.wait_timeout = std::chrono::seconds(20);
    o.tcp.stripe_threshold = 256 << 10;  // make the 1 MiB puts below striped
    o.transport = SYMMESH_RMA_TRANSPORT;
    return o;
  }
};

TEST_P(Rma, PutAndGetReachEveryPeAtEverySize) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const int n = pe.n_pes();
    for (size_t bytes : {size_t{1}, size_t{4000}, size_t{100'000}, size_t{1} << 20}) {
      auto* inbox = static_cast<uint8_t*>(pe.malloc(bytes * n));
      std::vector<uint8_t> mine(bytes);
      for (size_t i = 0; i < bytes; ++i) mine[i] = uint8_t(pe.my_pe() * 31 + i * 7);
      for (int target = 0; target < n; ++target) {
        pe.put(inbox + bytes * pe.my_pe(), mine.data(), bytes, target);
      }
      pe.quiet();
      barrier_all(pe);
      for (int source = 0; source < n; ++source) {
        for (size_t i = 0; i < bytes; i += 97) {
          ASSERT_EQ(inbox[bytes * source + i], uint8_t(source * 31 + i * 7))
              << "bytes=" << bytes << " source=" << source << " i=" << i;
        }
      }
      std::vector<uint8_t> fetched(bytes);
      const int neighbour = (pe.my_pe() + 1) % n;
      pe.get(fetched.data(), inbox + bytes * pe.my_pe(), bytes, neighbour);
      EXPECT_EQ(fetched, mine);
      barrier_all(pe);
      pe.free(inbox);
    }
  });
}

TEST_P(Rma, AtomicsCountEveryAddOnce) {
  LocalCluster cluster(options(GetParam()));
  constexpr int kAdds = 200;
  cluster.run([](Pe& pe) {
    auto* counter = pe.malloc_array<uint64_t>(1);
    *counter = 0;
    barrier_all(pe);
    std::vector<uint64_t> fetched;
    for (int i = 0; i < kAdds; ++i) {
      if (i % 2) {
        pe.atomic_add(counter, 1, 0);
      } else {
        fetched.push_back(pe.atomic_fetch_add(counter, 1, 0));
      }
    }
    pe.quiet();
    barrier_all(pe);
    if (pe.my_pe() == 0) {
      EXPECT_EQ(*counter, uint64_t(kAdds) * pe.n_pes());
    }
    // Every fetched value is distinct across all PEs; here: strictly increasing per PE.
    for (size_t i = 1; i < fetched.size(); ++i) EXPECT_GT(fetched[i], fetched[i - 1]);
  });
}

TEST_P(Rma, PutSignalNeverShowsTheSignalBeforeTheData) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const int n = pe.n_pes();
    const size_t bytes = (1 << 20) + 124;  // striped on tcp, not a multiple of the stripe unit
    constexpr int kRounds = 12;
    auto* inbox = static_cast<uint32_t*>(pe.malloc(bytes * kRounds));
    auto* signal = pe.malloc_array<uint64_t>(1);
    *signal = 0;
    barrier_all(pe);
    const int to = (pe.my_pe() + 1) % n;
    const int from = (pe.my_pe() + n - 1) % n;
    const size_t words = bytes / 4;
    std::vector<uint32_t> data(words);
    for (int round = 0; round < kRounds; ++round) {
      std::iota(data.begin(), data.end(), uint32_t(round * 1000 + pe.my_pe()));
      // Back to back, no quiet in between: each signal must still trail its data.
      pe.put_signal(reinterpret_cast<std::byte*>(inbox) + bytes * round, data.data(), words * 4,
                    signal, 1, SignalOp::kAdd, to);
    }
    // The last add must trail every stripe of every put before it arrived.
    pe.signal_wait_until(signal, Cmp::kGe, uint64_t(kRounds));
    for (int round = 0; round < kRounds; ++round) {
      const auto* got =
          reinterpret_cast<const uint32_t*>(reinterpret_cast<std::byte*>(inbox) + bytes * round);
      ASSERT_EQ(got[0], uint32_t(round * 1000 + from));
      ASSERT_EQ(got[words - 1], uint32_t(round * 1000 + from + words - 1));
    }
    barrier_all(pe);
  });
}

// Pieces of every kind: empty ones, a few copied small (below tcp's eager limit), more parts
// than one sendmsg takes, and a striped put whose stripes cut pieces in two. The source is
// overwritten as soon as each put returns (local completion). With `send_buffer` set, tcp's
// kernel takes each large frame in parts and the io threads write the rest from the pieces.
void gathered_puts_land_end_to_end(Pe& pe) {
  const int n = pe.n_pes();
  struct Case {
    size_t pieces, piece_bytes;
  };
  for (const Case c : {Case{5, 1000}, Case{150, 100}, Case{200, 1000}, Case{130, 3001}}) {
    // Each piece's own bytes, laid apart in `source` with a gap after each, empty pieces
    // between them.
    const size_t gap = 24, bytes = c.pieces * c.piece_bytes;
    std::vector<uint8_t> source(c.pieces * (c.piece_bytes + gap));
    std::vector<PutPiece> pieces;
    for (size_t p = 0; p < c.pieces; ++p) {
      pieces.push_back({source.data() + p * (c.piece_bytes + gap), c.piece_bytes});
      if (p % 7 == 0) pieces.push_back({nullptr, 0});
    }
    auto* inbox = static_cast<uint8_t*>(pe.malloc(bytes * n));
    auto* signals = pe.malloc_array<uint64_t>(n);
    std::fill(signals, signals + n, 0);
    barrier_all(pe);
    for (int target = 0; target < n; ++target) {
      for (size_t i = 0; i < source.size(); ++i) source[i] = uint8_t(pe.my_pe() * 13 + i * 7);
      pe.put_signal(inbox + bytes * pe.my_pe(), pieces, signals + pe.my_pe(), 7, SignalOp::kSet,
                    target);
      std::fill(source.begin(), source.end(), uint8_t(0xEE));  // the put returned: ours again
    }
    for (int from = 0; from < n; ++from) {
      pe.signal_wait_until(signals + from, Cmp::kEq, 7);
      for (size_t p = 0; p < c.pieces; ++p) {
        for (size_t i = 0; i < c.piece_bytes; ++i) {
          const size_t at = p * (c.piece_bytes + gap) + i;
          ASSERT_EQ(inbox[bytes * from + p * c.piece_bytes + i], uint8_t(from * 13 + at * 7))
              << "pieces=" << c.pieces << " from=" << from << " piece=" << p << " i=" << i;
        }
      }
    }
    barrier_all(pe);
    pe.free(signals);
    pe.free(inbox);
  }
}

TEST_P(Rma, AGatheredPutSignalWritesItsPiecesEndToEnd) {
  LocalCluster cluster(options(GetParam()));
  cluster.run(gathered_puts_land_end_to_end);
}

TEST_P(Rma, AGatheredPutTheKernelTakesInPartsWritesEveryPiece) {
  LocalClusterOptions o = options(GetParam());
  o.tcp.send_buffer_bytes = 8 << 10;
  LocalCluster cluster(o);
  cluster.run(gathered_puts_land_end_to_end);
}

// The edges: pieces that end exactly on a stripe boundary, empty pieces first and last, an
// ADD signal, a put of no pieces at all, and nothing written past the pieces' end.
TEST_P(Rma, AGatheredPutsEdgesWriteNoMoreThanItsPieces) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const int n = pe.n_pes();
    constexpr size_t kGuard = 64;
    for (size_t count : {size_t{0}, size_t{3}, size_t{100}}) {
      const size_t piece = 4096, bytes = count * piece;
      std::vector<uint8_t> source(bytes + 1);
      for (size_t i = 0; i < source.size(); ++i) source[i] = uint8_t(pe.my_pe() * 5 + i * 3);
      std::vector<PutPiece> pieces{{nullptr, 0}};
      for (size_t p = 0; p < count; ++p) pieces.push_back({source.data() + p * piece, piece});
      pieces.push_back({nullptr, 0});
      auto* inbox = static_cast<uint8_t*>(pe.malloc(bytes * n + kGuard));
      auto* signals = pe.malloc_array<uint64_t>(n);
      std::fill(signals, signals + n, 0);
      std::fill(inbox, inbox + bytes * n + kGuard, uint8_t(0xAB));
      barrier_all(pe);
      for (int target = 0; target < n; ++target) {
        pe.put_signal(inbox + bytes * pe.my_pe(), pieces, signals + pe.my_pe(), 3, SignalOp::kAdd,
                      target);
        pe.put_signal(inbox + bytes * pe.my_pe(), std::span<const PutPiece>{}, signals + pe.my_pe(),
                      4, SignalOp::kAdd, target);
      }
      for (int from = 0; from < n; ++from) {
        pe.signal_wait_until(signals + from, Cmp::kEq, 7);
        for (size_t i = 0; i < bytes; ++i) {
          ASSERT_EQ(inbox[bytes * from + i], uint8_t(from * 5 + i * 3))
              << "pieces=" << count << " from=" << from << " i=" << i;
        }
      }
      for (size_t i = 0; i < kGuard; ++i) ASSERT_EQ(inbox[bytes * n + i], 0xAB) << "guard " << i;
      barrier_all(pe);
      pe.free(signals);
      pe.free(inbox);
    }
  });
}

TEST_P(Rma, SignalSetOrderingOneRoundAtATime) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const int n = pe.n_pes();
    const size_t words = 300'000;  // 1.2 MB: striped on tcp
    auto* inbox = pe.malloc_array<uint32_t>(words);
    auto* signal = pe.malloc_array<uint64_t>(1);
    auto* ack = pe.malloc_array<uint64_t>(1);
    *signal = 0;
    *ack = 0;
    barrier_all(pe);
    const int to = (pe.my_pe() + 1) % n;
    const int from = (pe.my_pe() + n - 1) % n;
    std::vector<uint32_t> data(words);
    for (uint64_t round = 1; round <= 20; ++round) {
      std::fill(data.begin(), data.end(), uint32_t(round));
      if (round > 1) pe.signal_wait_until(ack, Cmp::kGe, round - 1);  // inbox free again
      pe.put_signal(inbox, data.data(), words * 4, signal, round, SignalOp::kSet, to);
      pe.signal_wait_until(signal, Cmp::kGe, round);
      ASSERT_EQ(inbox[0], round);
      ASSERT_EQ(inbox[words / 2], round);
      ASSERT_EQ(inbox[words - 1], round);
      pe.signal_set(ack, round, from);
    }
    barrier_all(pe);
  });
}

TEST_P(Rma, QuietMeansDeliveredAndPtrIsDirectOnlyOnTheSameNode) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    auto* word = pe.malloc_array<uint64_t>(1);
    *word = 0;
    barrier_all(pe);
    const int n = pe.n_pes();
    for (int target = 0; target < n; ++target) {
      void* direct = pe.ptr(word, target);
      EXPECT_EQ(direct != nullptr, pe.node_of(target) == pe.my_node()) << "target " << target;
    }
    const int to = (pe.my_pe() + 1) % n;
    const uint64_t value = 1000 + pe.my_pe();
    pe.put(word, &value, sizeof(value), to);
    pe.quiet();
    uint64_t seen = 0;
    pe.get(&seen, word, sizeof(seen), to);
    EXPECT_EQ(seen, value);
  });
}

TEST_P(Rma, WaitTimeoutNamesThePeTheSignalAndTheValues) {
  LocalClusterOptions o = options(GetParam());
  o.wait_timeout = std::chrono::milliseconds(300);
  LocalCluster cluster(o);
  cluster.run([](Pe& pe) {
    auto* signal = pe.malloc_array<uint64_t>(1);
    *signal = 3;
    try {
      pe.signal_wait_until(signal, Cmp::kGe, 7);
      FAIL() << "expected a timeout";
    } catch (const TimeoutError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("PE " + std::to_string(pe.my_pe())), std::string::npos) << message;
      EXPECT_NE(message.find(">= 7"), std::string::npos) << message;
      EXPECT_NE(message.find("saw 3"), std::string::npos) << message;
    }
  });
}

TEST_P(Rma, NonSymmetricAddressAndExhaustedHeapAreClearErrors) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    uint64_t local = 0;
    EXPECT_THROW(pe.put(&local, &local, 8, 0), InvalidArgument);
    EXPECT_THROW(pe.put(pe.malloc(8), &local, 8, pe.n_pes()), InvalidArgument);
    try {
      pe.malloc(size_t{1} << 40);
      FAIL();
    } catch (const HeapExhausted& e) {
      EXPECT_NE(std::string(e.what()).find("asked 1.0 TiB"), std::string::npos) << e.what();
    }
  });
}

// A failed call aborts its node: from then on no operation of a PE there starts, on any
// transport; each throws naming itself, its target and the abort, and writes nothing. Once the
// abort is cleared (the daemon does it between jobs) they work again.
TEST_P(Rma, NoOperationStartsOnceTheNodeIsAborted) {
  const Shape shape = GetParam();
  LocalCluster cluster(options(shape));
  std::barrier in_step(shape.nodes * shape.ranks);  // the PEs are threads of this process
  auto body = [&](Pe& pe) {
    const int n = pe.n_pes(), to = (pe.my_pe() + 1) % n;
    auto* words = pe.malloc_array<uint64_t>(2);
    words[0] = words[1] = 0;
    barrier_all(pe);
    in_step.arrive_and_wait();  // no PE is still in the barrier, whose waits an abort ends
    if (pe.local_rank() == 0) pe.node().doorbell().abort("a peer failed");
    in_step.arrive_and_wait();
    const uint64_t value = 42;
    uint64_t fetched = 0;
    const std::vector<std::pair<std::string, std::function<void()>>> ops = {
        {"put", [&] { pe.put(words, &value, 8, to); }},
        {"get", [&] { pe.get(&fetched, words, 8, to); }},
        {"atomic_add", [&] { pe.atomic_add(words, 1, to); }},
        {"atomic_fetch_add", [&] { pe.atomic_fetch_add(words, 1, to); }},
        {"put_signal", [&] { pe.put_signal(words, &value, 8, words + 1, 1, SignalOp::kAdd, to); }},
        {"signal_set", [&] { pe.signal_set(words + 1, 7, to); }},
        {"signal_add", [&] { pe.signal_add(words + 1, 7, to); }},
    };
    for (const auto& [name, op] : ops) {
      try {
        op();
        ADD_FAILURE() << name << " started on an aborted node";
      } catch (const AbortedError& e) {
        EXPECT_EQ(std::string(e.what()), "PE " + std::to_string(pe.my_pe()) + ": " + name +
                                             " to PE " + std::to_string(to) +
                                             ": aborted: a peer failed");
      }
    }
    in_step.arrive_and_wait();
    if (pe.local_rank() == 0) pe.node().doorbell().clear_abort();
    in_step.arrive_and_wait();
    barrier_all(pe);
    EXPECT_EQ(words[0], 0u);
    EXPECT_EQ(words[1], 0u);
    EXPECT_EQ(fetched, 0u);
    barrier_all(pe);  // every PE checked its words before any writes them below
    pe.put_signal(words, &value, 8, words + 1, 1, SignalOp::kAdd, to);
    pe.signal_wait_until(words + 1, Cmp::kGe, 1);
    EXPECT_EQ(words[0], value);
  };
  cluster.run([&](Pe& pe) {
    try {
      body(pe);
    } catch (...) {  // the other PEs must not wait at in_step for this one
      in_step.arrive_and_drop();
      throw;
    }
  });
}

// Soft-RoCE is slow under emulation: the verbs run takes the multi-node shapes only.
std::vector<Shape> shapes() {
  if (std::string_view(SYMMESH_RMA_TRANSPORT) == "verbs") return {{2, 1}, {2, 2}};
  return {{1, 3}, {2, 1}, {2, 2}, {3, 2}};
}

INSTANTIATE_TEST_SUITE_P(Shapes, Rma, ::testing::ValuesIn(shapes()), [](const auto& info) {
  return std::to_string(info.param.nodes) + "x" + std::to_string(info.param.ranks);
});

}  // namespace
}  // namespace symmesh
