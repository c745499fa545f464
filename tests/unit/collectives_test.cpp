// Collectives: every op x dtype x algorithm on several cluster shapes, with element counts
// that do not divide by the PE count, verified element-wise against a reference computed
// from the same seeded inputs. Inputs are multiples of 1/8 in [-1, 1], so sums of up to 16
// PEs are exact in every dtype and the check can be exact.
#include "runtime/collectives.h"

#include <gtest/gtest.h>

#include "common/errors.h"
#include "common/streaming_copy.h"
#include "runtime/barrier.h"
#include "runtime/collectives/ring.h"
#include "runtime/enum_words.h"
#include "tests/support/local_cluster.h"

namespace symmesh {
namespace {

struct Shape {
  int nodes;
  int ranks;
};

float input_value(int pe, size_t i) {
  return float(int((pe * 131 + i * 7) % 17) - 8) / 8.0f;
}

void fill(void* buffer, int pe, size_t count, DType dtype, size_t first = 0) {
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = input_value(pe, first + i);
  store_from_f32(buffer, values.data(), count, dtype);
}

std::vector<float> read(const void* buffer, size_t count, DType dtype) {
  std::vector<float> values(count);
  load_f32(values.data(), buffer, count, dtype);
  return values;
}

float reduced(int n_pes, size_t i, ReduceOp op) {
  float result = input_value(0, i);
  for (int pe = 1; pe < n_pes; ++pe) {
    result = reduce_pair(result, input_value(pe, i), op);
  }
  return result;
}

LocalClusterOptions options(Shape shape) {
  LocalClusterOptions o;
  o.nodes = shape.nodes;
  o.ranks_per_node = shape.ranks;
  o.heap_size = size_t(shape.ranks) * (40 << 20);
  o.wait_timeout = std::chrono::seconds(60);
  o.tcp.connections_per_peer = 2;
  o.tcp.io_threads = 1;
  o.tcp.stripe_threshold = 128 << 10;
  return o;
}

const DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16};
const CollAlgo kAlgos[] = {CollAlgo::kRing, CollAlgo::kHier};
// Odd counts: below the PE count, not divisible by it, and more than one ring chunk.
const size_t kCounts[] = {1, 7, 1001, 100'003};

class Collectives : public ::testing::TestWithParam<Shape> {};

// Runs `check` for every dtype x algorithm x odd count, with a filled symmetric input of
// `count` elements and a symmetric output of dst_count(count) elements.
template <class DstCount, class Check>
void for_each_case(Pe& pe, DstCount dst_count, Check check) {
  for (DType dtype : kDtypes) {
    for (CollAlgo algo : kAlgos) {
      for (size_t count : kCounts) {
        const size_t element = dtype_size(dtype);
        void* src = pe.malloc(count * element);
        void* dst = pe.malloc(dst_count(count) * element);
        fill(src, pe.my_pe(), count, dtype);
        SCOPED_TRACE(wire::word(dtype) + " " + wire::word(algo) +
                     " count=" + std::to_string(count));
        check(dtype, algo, count, src, dst);
        // The next case's collective writes into peers' buffers at the same offsets: it may
        // start only when every PE has read this one's output (OpenSHMEM's rule too).
        barrier_all(pe);
        pe.free(dst);
        pe.free(src);
      }
    }
  }
}

TEST_P(Collectives, AllreduceEveryDtypeAlgorithmOpAndOddCountOutOfPlaceAndInPlace) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    for (bool in_place : {false, true}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
        for_each_case(
            pe, [](size_t count) { return count; },
            [&](DType dtype, CollAlgo algo, size_t count, void* src, void* dst) {
              if (in_place) dst = src;
              allreduce(pe, pe.team_world(), dst, src, count, dtype, op, algo);
              const auto got = read(dst, count, dtype);
              for (size_t i = 0; i < count; ++i) {
                ASSERT_EQ(got[i], reduced(pe.n_pes(), i, op))
                    << " reduction " << int(op) << (in_place ? " in place" : "") << " i=" << i;
              }
            });
      }
    }
  });
}

TEST_P(Collectives, ReduceScatterGivesEachPeItsBlock) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const int n = pe.n_pes();
    for_each_case(
        pe, [&](size_t count) { return count / n + 1; },
        [&](DType dtype, CollAlgo algo, size_t count, void* src, void* dst) {
          reduce_scatter(pe, pe.team_world(), dst, src, count, dtype, ReduceOp::kSum, algo);
          const size_t begin = count * pe.my_pe() / n;
          const size_t mine = count * (pe.my_pe() + 1) / n - begin;
          const auto got = read(dst, mine, dtype);
          for (size_t i = 0; i < mine; ++i) {
            ASSERT_EQ(got[i], reduced(n, begin + i, ReduceOp::kSum)) << "i=" << i;
          }
        });
  });
}

TEST_P(Collectives, AllgatherPutsEveryContributionInPlace) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const int n = pe.n_pes();
    for_each_case(
        pe, [&](size_t count) { return count * n; },
        [&](DType dtype, CollAlgo algo, size_t count, void* src, void* dst) {
          allgather(pe, pe.team_world(), dst, src, count, dtype, algo);
          const auto got = read(dst, count * n, dtype);
          for (int source = 0; source < n; ++source) {
            for (size_t i = 0; i < count; ++i) {
              ASSERT_EQ(got[source * count + i], input_value(source, i)) << "from " << source;
            }
          }
        });
  });
}

TEST_P(Collectives, BroadcastFromEveryRootLandsOnEveryMemberInPlaceAndNot) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const int n = pe.n_pes();
    for (const size_t bytes : {size_t{1}, size_t{4099}, size_t{3} << 20}) {
      auto* src = static_cast<std::byte*>(pe.malloc(bytes));
      auto* dst = static_cast<std::byte*>(pe.malloc(bytes));
      for (int root = 0; root < n; ++root) {
        for (const bool in_place : {false, true}) {
          SCOPED_TRACE("bytes=" + std::to_string(bytes) + " root=" + std::to_string(root) +
                       (in_place ? " in place" : ""));
          for (size_t i = 0; i < bytes; ++i) {
            src[i] = std::byte((i * 31 + size_t(pe.my_pe()) * 7) & 0xff);
            dst[i] = std::byte(0xee);
          }
          void* into = in_place ? src : dst;
          broadcast(pe, pe.team_world(), into, src, bytes, root);
          const auto* got = static_cast<const std::byte*>(into);
          for (size_t i = 0; i < bytes; ++i) {
            ASSERT_EQ(got[i], std::byte((i * 31 + size_t(pe.team_world().pe(root)) * 7) & 0xff))
                << "byte " << i;
          }
          barrier_all(pe);  // every member read its output before the next call writes it
        }
      }
      pe.free(dst);
      pe.free(src);
    }
  });
}

// No barrier between the calls: a root's put into a node must wait until that node copied the
// call before (each member checks its output before it enters the next call).
TEST_P(Collectives, BroadcastsBackToBackEachDeliverTheirOwnBytes) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const int n = pe.n_pes();
    const size_t bytes = 64 << 10;
    auto* src = static_cast<std::byte*>(pe.malloc(bytes));
    auto* dst = static_cast<std::byte*>(pe.malloc(bytes));
    for (int call = 0; call < 200; ++call) {
      const int root = call % n;
      for (size_t i = 0; i < bytes; i += 512) src[i] = std::byte((call + i) & 0xff);
      broadcast(pe, pe.team_world(), dst, src, bytes, root);
      for (size_t i = 0; i < bytes; i += 512) {
        ASSERT_EQ(dst[i], std::byte((call + i) & 0xff)) << "call " << call << " byte " << i;
      }
    }
    pe.free(dst);
    pe.free(src);
  });
}

TEST(CollectivesErrors, ABroadcastFromARootOutsideTheTeamIsRefused) {
  LocalCluster cluster(options(Shape{1, 2}));
  cluster.run([](Pe& pe) {
    void* buffer = pe.malloc(64);
    EXPECT_THROW(broadcast(pe, pe.team_world(), buffer, buffer, 64, 2), InvalidArgument);
    pe.free(buffer);
  });
}

TEST_P(Collectives, AlltoallAndAlltoallv) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const int n = pe.n_pes();
    const int me = pe.my_pe();
    for (DType dtype : kDtypes) {
      for (size_t count : {size_t{1}, size_t{333}, size_t{70'001}}) {
        const size_t element = dtype_size(dtype);
        void* src = pe.malloc(count * n * element);
        void* dst = pe.malloc(count * n * element);
        // Block j of PE p holds the values of "PE p*n + j" so every block is distinct.
        for (int j = 0; j < n; ++j) {
          fill(static_cast<std::byte*>(src) + j * count * element, me * n + j, count, dtype);
        }
        alltoall(pe, pe.team_world(), dst, src, count, dtype);
        const auto got = read(dst, count * n, dtype);
        for (int i = 0; i < n; ++i) {
          for (size_t e = 0; e < count; e += 1 + count / 50) {
            ASSERT_EQ(got[i * count + e], input_value(i * n + me, e)) << "from " << i;
          }
        }
        pe.free(dst);
        pe.free(src);
      }
    }
    // alltoallv: PE p sends (p + j) % 3 * 1000 + j elements to PE j.
    std::vector<size_t> send(n);
    size_t total = 0;
    for (int j = 0; j < n; ++j) total += send[j] = (me + j) % 3 * 1000 + j;
    const size_t capacity = 3000 * n + n * n;  // the same on every PE: allocations are symmetric
    ASSERT_LE(total, capacity);
    auto* src = pe.malloc_array<float>(capacity);
    size_t at = 0;
    for (int j = 0; j < n; ++j) {
      fill(src + at, me * n + j, send[j], DType::kF32);
      at += send[j];
    }
    auto* dst = pe.malloc_array<float>(capacity);
    const auto received = alltoallv(pe, pe.team_world(), dst, capacity, src, send, DType::kF32);
    size_t offset = 0;
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(received[i], (i + me) % 3 * 1000 + size_t(me));
      for (size_t e = 0; e < received[i]; ++e) {
        ASSERT_EQ(dst[offset + e], input_value(i * n + me, e)) << "from " << i << " e=" << e;
      }
      offset += received[i];
    }
    // Room for one element less than some PE receives: every PE gets the error.
    size_t most = 0;
    for (int p = 0; p < n; ++p) {
      size_t incoming = 0;
      for (int i = 0; i < n; ++i) incoming += (i + p) % 3 * 1000 + size_t(p);
      most = std::max(most, incoming);
    }
    if (most > 0) {
      EXPECT_THROW(alltoallv(pe, pe.team_world(), dst, most - 1, src, send, DType::kF32),
                   InvalidArgument);
    }
  });
}

TEST_P(Collectives, ManyChunksThroughThePipelinedRing) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const size_t count = 1'500'007;  // several scratch chunks per block, with a ragged tail
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (CollAlgo algo : kAlgos) {
        const size_t element = dtype_size(dtype);
        void* src = pe.malloc(count * element);
        void* dst = pe.malloc(count * element);
        fill(src, pe.my_pe(), count, dtype);
        allreduce(pe, pe.team_world(), dst, src, count, dtype, ReduceOp::kSum, algo);
        auto got = read(dst, count, dtype);
        for (size_t i = 0; i < count; i += 3) {
          ASSERT_EQ(got[i], reduced(pe.n_pes(), i, ReduceOp::kSum))
              << wire::word(dtype) << " " << wire::word(algo) << " i=" << i;
        }
        reduce_scatter(pe, pe.team_world(), dst, src, count, dtype, ReduceOp::kSum, algo);
        const size_t begin = count * pe.my_pe() / pe.n_pes();
        const size_t mine = count * (pe.my_pe() + 1) / pe.n_pes() - begin;
        got = read(dst, mine, dtype);
        for (size_t i = 0; i < mine; i += 3) {
          ASSERT_EQ(got[i], reduced(pe.n_pes(), begin + i, ReduceOp::kSum));
        }
        pe.free(dst);
        pe.free(src);
      }
    }
  });
}

// The ring reads each member's input while it runs (and node peers' inputs, for hier): with the
// output the input itself, no value may be overwritten before every reader is done with it.
TEST_P(Collectives, AllreduceInPlace) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const size_t count = 700'001;  // several ring chunks per block
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      for (CollAlgo algo : kAlgos) {
        void* data = pe.malloc(count * dtype_size(dtype));
        fill(data, pe.my_pe(), count, dtype);
        barrier_all(pe);
        allreduce(pe, pe.team_world(), data, data, count, dtype, ReduceOp::kSum, algo);
        const auto got = read(data, count, dtype);
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(got[i], reduced(pe.n_pes(), i, ReduceOp::kSum))
              << wire::word(dtype) << " " << wire::word(algo) << " i=" << i;
        }
        barrier_all(pe);
        pe.free(data);
      }
    }
  });
}

// Small all-reduces take the one-shot across nodes, large ones the ring, and both use the team
// scratch: back to back with no barrier between them, a member that runs ahead into the next
// call must not write into a scratch a slower member is still reading.
TEST_P(Collectives, OneShotAndRingBackToBackOnOneTeam) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const size_t counts[] = {1001, 600'000, 20'000, 7, 600'000, 30'000, 20'000};
    std::vector<float*> srcs, dsts;
    for (size_t count : counts) {
      srcs.push_back(pe.malloc_array<float>(count));
      dsts.push_back(pe.malloc_array<float>(count));
      fill(srcs.back(), pe.my_pe(), count, DType::kF32);
    }
    barrier_all(pe);
    for (size_t c = 0; c < std::size(counts); ++c) {
      if (c == 4) {
        reduce_scatter(pe, pe.team_world(), dsts[c], srcs[c], counts[c], DType::kF32,
                       ReduceOp::kSum, CollAlgo::kHier);
      } else {
        allreduce(pe, pe.team_world(), dsts[c], srcs[c], counts[c], DType::kF32, ReduceOp::kSum,
                  CollAlgo::kHier);
      }
    }
    for (size_t c = 0; c < std::size(counts); ++c) {
      const size_t begin = c == 4 ? counts[c] * pe.my_pe() / pe.n_pes() : 0;
      const size_t end = c == 4 ? counts[c] * (pe.my_pe() + 1) / pe.n_pes() : counts[c];
      for (size_t i = begin; i < end; ++i) {
        ASSERT_EQ(dsts[c][i - begin], reduced(pe.n_pes(), i, ReduceOp::kSum))
            << "call " << c << " of " << counts[c] << " i=" << i;
      }
    }
  });
}

// A one-shot right after another skips the entry announcement and writes into the other half
// of the scratch: many back to back, with new inputs each call and no barrier between calls,
// so a member that runs ahead writes while a slower one still reads. Between them a
// reduce-scatter of several ring chunks per block (a ring that takes no collective number,
// after which the next one-shot must announce again) and a ring all-reduce. Each call's result
// is checked before the next call overwrites it.
TEST_P(Collectives, ManyOneShotsBackToBackEachGetTheirOwnInputs) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const size_t kReduceScatter = 0;
    const size_t counts[] = {20'000, 7, kReduceScatter, 1001, 20'000, 100'003, 3, 20'000};
    const size_t block = 4 * RingChannel::kChunkBytes / sizeof(float);  // per PE
    const size_t scattered = block * size_t(pe.n_pes());
    auto* src = pe.malloc_array<float>(scattered);
    auto* dst = pe.malloc_array<float>(100'003);
    barrier_all(pe);
    for (size_t call = 0; call < 120; ++call) {
      const size_t first = call * 5;  // each call's inputs differ from the last call's
      const size_t count = counts[call % std::size(counts)];
      if (count == kReduceScatter) {
        fill(src, pe.my_pe(), scattered, DType::kF32, first);
        reduce_scatter(pe, pe.team_world(), dst, src, scattered, DType::kF32, ReduceOp::kSum,
                       CollAlgo::kHier);
        const size_t mine = block * size_t(pe.my_pe());
        for (size_t i = 0; i < block; ++i) {
          ASSERT_EQ(dst[i], reduced(pe.n_pes(), first + mine + i, ReduceOp::kSum))
              << "call " << call << " (reduce-scatter) i=" << i;
        }
        continue;
      }
      fill(src, pe.my_pe(), count, DType::kF32, first);
      allreduce(pe, pe.team_world(), dst, src, count, DType::kF32, ReduceOp::kSum, CollAlgo::kHier);
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(dst[i], reduced(pe.n_pes(), first + i, ReduceOp::kSum))
            << "call " << call << " of " << count << " i=" << i;
      }
    }
  });
}

TEST_P(Collectives, SameInputsGiveBitwiseSameOutputs) {
  LocalCluster cluster(options(GetParam()));
  cluster.run([](Pe& pe) {
    const size_t count = 50'001;
    auto* src = pe.malloc_array<float>(count);
    auto* dst = pe.malloc_array<float>(count);
    for (size_t i = 0; i < count; ++i) src[i] = 1.0f / float(1 + (i * 7 + pe.my_pe() * 13) % 97);
    for (CollAlgo algo : kAlgos) {
      allreduce(pe, pe.team_world(), dst, src, count, DType::kF32, ReduceOp::kSum, algo);
      std::vector<float> first(dst, dst + count);
      for (int run = 0; run < 3; ++run) {
        allreduce(pe, pe.team_world(), dst, src, count, DType::kF32, ReduceOp::kSum, algo);
        ASSERT_EQ(0, std::memcmp(first.data(), dst, count * sizeof(float)));
      }
      // In place: the same operations in the same order, so the same bits.
      std::memcpy(dst, src, count * sizeof(float));
      barrier_all(pe);
      allreduce(pe, pe.team_world(), dst, dst, count, DType::kF32, ReduceOp::kSum, algo);
      ASSERT_EQ(0, std::memcmp(first.data(), dst, count * sizeof(float))) << "in place";
      barrier_all(pe);
    }
  });
}

// The ring writes a reduce-scatter's sums while members still read the inputs: an output over
// the input (in place, or overlapping it) is refused by every member alike, so none waits in the
// ring for one that refused, and the team goes on.
TEST(CollectivesErrors, AReduceScatterOverItsInputIsRefusedByEveryMember) {
  LocalCluster cluster(options({2, 2}));
  cluster.run([](Pe& pe) {
    const size_t count = 4001;
    auto* src = pe.malloc_array<float>(2 * count);
    fill(src, pe.my_pe(), count, DType::kF32);
    for (CollAlgo algo : kAlgos) {
      for (float* dst : {src, src + count / 2, src + count - 1}) {
        try {
          reduce_scatter(pe, pe.team_world(), dst, src, count, DType::kF32, ReduceOp::kSum, algo);
          ADD_FAILURE() << "an output at element " << dst - src << " was taken";
        } catch (const InvalidArgument& e) {
          EXPECT_NE(std::string(e.what()).find("overlaps the input"), std::string::npos)
              << e.what();
        }
      }
      // Right after the input, the same call runs.
      float* dst = src + count;
      reduce_scatter(pe, pe.team_world(), dst, src, count, DType::kF32, ReduceOp::kSum, algo);
      const size_t begin = count * pe.my_pe() / pe.n_pes();
      const size_t mine = count * (pe.my_pe() + 1) / pe.n_pes() - begin;
      for (size_t i = 0; i < mine; ++i) {
        ASSERT_EQ(dst[i], reduced(pe.n_pes(), begin + i, ReduceOp::kSum)) << "i=" << i;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, Collectives,
                         ::testing::Values(Shape{1, 1}, Shape{1, 3}, Shape{2, 1}, Shape{2, 2},
                                           Shape{3, 2}, Shape{2, 3}),
                         [](const auto& info) {
                           return std::to_string(info.param.nodes) + "x" +
                                  std::to_string(info.param.ranks);
                         });

// The streaming tests size their calls from the threshold; a host whose cache share would make
// them huge skips them.
constexpr size_t kLargestStreamingThreshold = size_t{64} << 20;

// Fails the test and stops this PE's run at the first element that differs, so its peers are
// aborted at once instead of waiting for it at the next barrier.
void expect_element(float got, float want, const std::string& where) {
  if (got == want) return;
  ADD_FAILURE() << where << ": got " << got << ", want " << want;
  throw std::runtime_error("a wrong element at " + where);
}

// hier copies its node peers' parts into its output with streaming stores once they add up to
// the cache share: sized past it, out of place and in place, every element checked.
TEST(CollectivesLarge, HierAllreducePastTheCacheShareIsExact) {
  if (streaming_threshold() > kLargestStreamingThreshold) GTEST_SKIP() << "cache share too big";
  const size_t count = streaming_threshold() / sizeof(float) * 2 + 1001;  // half is the peer's
  ASSERT_GE((count - count / 2) * sizeof(float), streaming_threshold()) << "must stream";
  LocalClusterOptions o = options(Shape{1, 2});
  o.heap_size = 2 * (2 * count * sizeof(float) + (24 << 20));  // 2 PEs; scratch besides
  LocalCluster cluster(o);
  cluster.run([&](Pe& pe) {
    auto* src = pe.malloc_array<float>(count);
    auto* dst = pe.malloc_array<float>(count);
    for (float* out : {dst, src}) {
      fill(src, pe.my_pe(), count, DType::kF32);
      barrier_all(pe);
      allreduce(pe, pe.team_world(), out, src, count, DType::kF32, ReduceOp::kSum, CollAlgo::kHier);
      for (size_t i = 0; i < count; ++i) {
        expect_element(
            out[i], reduced(pe.n_pes(), i, ReduceOp::kSum),
            std::string(out == src ? "in place" : "out of place") + " i=" + std::to_string(i));
      }
      barrier_all(pe);
    }
  });
}

// hier's all-gather copies its node's inputs, then its node peers' parts from the other
// nodes, each step streamed once it adds up to the cache share: sized so both steps do.
TEST(CollectivesLarge, HierAllgatherPastTheCacheShareIsExact) {
  if (streaming_threshold() > kLargestStreamingThreshold) GTEST_SKIP() << "cache share too big";
  const size_t count = streaming_threshold() / sizeof(float) + 1001;
  ASSERT_GE(count * sizeof(float), streaming_threshold()) << "the second step must stream";
  LocalClusterOptions o = options(Shape{2, 2});
  o.heap_size = 2 * (5 * count * sizeof(float) + (24 << 20));  // 2 PEs; scratch besides
  LocalCluster cluster(o);
  cluster.run([&](Pe& pe) {
    const int n = pe.n_pes();
    auto* src = pe.malloc_array<float>(count);
    auto* dst = pe.malloc_array<float>(count * n);
    fill(src, pe.my_pe(), count, DType::kF32);
    barrier_all(pe);
    allgather(pe, pe.team_world(), dst, src, count, DType::kF32, CollAlgo::kHier);
    for (int source = 0; source < n; ++source) {
      for (size_t i = 0; i < count; ++i) {
        expect_element(dst[source * count + i], input_value(source, i),
                       "from PE " + std::to_string(source) + " i=" + std::to_string(i));
      }
    }
    barrier_all(pe);
  });
}

TEST(CollectivesTeams, RingOnAStridedTeamAndHierRefusedOnANonUniformOne) {
  LocalCluster cluster(options(Shape{2, 3}));
  cluster.run([](Pe& pe) {
    // PEs 0, 2, 4: two on node 0, one on node 1: ring works, hier is refused.
    auto team = pe.team_split_strided(pe.team_world(), 0, 2, 3, "evens");
    if (team) {
      auto* src = pe.malloc_array<float>(1000);
      auto* dst = pe.malloc_array<float>(1000);
      fill(src, pe.my_pe(), 1000, DType::kF32);
      allreduce(pe, *team, dst, src, 1000, DType::kF32, ReduceOp::kSum, CollAlgo::kRing);
      for (size_t i = 0; i < 1000; ++i) {
        ASSERT_EQ(dst[i], input_value(0, i) + input_value(2, i) + input_value(4, i));
      }
      EXPECT_THROW(
          allreduce(pe, *team, dst, src, 1000, DType::kF32, ReduceOp::kSum, CollAlgo::kHier),
          InvalidArgument);
    } else {
      // Non-members still allocate so that heaps stay symmetric.
      pe.malloc_array<float>(1000);
      pe.malloc_array<float>(1000);
    }
  });
}

}  // namespace
}  // namespace symmesh
