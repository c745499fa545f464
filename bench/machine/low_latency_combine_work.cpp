// The CPU work the low-latency MoE combine's API asks of this machine at 2 nodes x 2 PEs, as
// time on all its CPUs: what a call would take if that work were shared by every CPU with no
// waiting, done by the same kernels the combine runs.
//   1. Weighted node sums: each landing PE reads every (token, expert) row of its records once
//      (tokens x nodes records of topk / nodes rows, in one group per local PE) and writes one
//      bf16 row per record (`weighted_group_sum`). The rows are written just before, by
//      stand-in experts, as the job's are.
//   2. The rows for the other node cross loopback tcp: one stream each way carrying each of
//      its node's PEs' rows in turn, the kernel copying them at both ends.
//   3. Home sums: each PE adds its tokens' rows from both nodes (`reduce_rows`).
// Each phase runs alone, one thread per CPU (the PEs' shares dealt round robin); for tcp, a
// sender and a receiver thread per stream (one stream per PE cost the same or more). A phase's
// cost is the process's CPU time over it (user and system, the kernel's copies included). The
// figure is the sum of the phases' median costs over the CPUs. It is an estimate, not a bound:
// the calls themselves measured below it (docs/PERFORMANCE.md), likely because inside a call
// the kernel sends rows the weighted pass has just written, still in the cache.
//   low_latency_combine_work [TOKENS] [HIDDEN] [TOPK] [ROUNDS]   (128 7168 8 20)
#include <sys/resource.h>

#include <algorithm>
#include <asio.hpp>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>
#include <vector>

#include "common/cpu_binding.h"
#include "runtime/collectives/dtype.h"
#include "runtime/collectives/reduce_kernels.h"

namespace symmesh {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kNodes = 2, kRanks = 2, kPes = kNodes * kRanks;

struct Shape {
  size_t tokens, hidden, topk;
  size_t row_bytes() const { return hidden * 2; }
  size_t records() const { return tokens * kNodes; }  // per landing PE: a source per node
  size_t rows_per_record() const { return topk / kNodes; }
  size_t expert_rows() const { return records() * rows_per_record(); }  // per PE
};

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

struct Timing {
  double wall = 0, cpu = 0;
};

// Runs work(i) on `count` threads started together; the wall time from their start to the last
// one's end, and the process's CPU time meanwhile.
Timing run_together(size_t count, const std::function<void(size_t)>& work) {
  std::barrier start(std::ptrdiff_t(count + 1));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < count; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      work(i);
    });
  }
  const double cpu_before = process_cpu_seconds();
  const auto began = Clock::now();
  start.arrive_and_wait();
  for (std::thread& t : threads) t.join();
  Timing timing;
  timing.wall = std::chrono::duration<double>(Clock::now() - began).count();
  timing.cpu = process_cpu_seconds() - cpu_before;
  return timing;
}

class CombineWork {
 public:
  CombineWork(Shape shape, size_t cpus) : s_(shape), cpus_(cpus) {
    const size_t row = s_.row_bytes();
    for (int pe = 0; pe < kPes; ++pe) {
      expert_rows_[pe].resize(s_.expert_rows() * row);
      landing_[pe].resize(s_.records() * row);
      received_[pe].resize(s_.tokens * row);
      out_[pe].resize(s_.tokens * row);
    }
    connect_streams();
  }

  // The stand-in experts: every PE's rows written afresh (not timed).
  void write_expert_rows(uint16_t seed) {
    run_together(cpus_, [&](size_t thread) {
      for (size_t pe = thread; pe < kPes; pe += cpus_) {
        auto* bits = reinterpret_cast<uint16_t*>(expert_rows_[pe].data());
        const size_t count = expert_rows_[pe].size() / 2;
        for (size_t i = 0; i < count; ++i) bits[i] = uint16_t(0x3c00 + ((i + seed) & 0x1ff));
      }
    });
  }

  // Landing PE (node, local) weighs its records: record r's group g holds rows of node PE g,
  // each PE's rows split between the node's landing PEs, so every row is read exactly once.
  Timing weighted_sums() {
    return run_together(cpus_, [&](size_t thread) {
      const size_t per_group = s_.rows_per_record() / kRanks, row = s_.row_bytes();
      std::vector<WeightedRow> rows(s_.rows_per_record());
      std::vector<size_t> ends(kRanks);
      for (size_t pe = thread; pe < kPes; pe += cpus_) {
        const size_t node = pe / kRanks, local = pe % kRanks;
        for (size_t r = 0; r < s_.records(); ++r) {
          for (size_t g = 0; g < kRanks; ++g) {
            const std::vector<std::byte>& source = expert_rows_[node * kRanks + g];
            for (size_t j = 0; j < per_group; ++j) {
              const size_t at = (local * s_.records() + r) * per_group + j;
              rows[g * per_group + j] = {source.data() + at * row, DType::kBF16,
                                         0.125f * float(j + 1)};
            }
            ends[g] = (g + 1) * per_group;
          }
          weighted_group_sum(landing_[pe].data() + r * row, DType::kBF16, rows.data(), ends.data(),
                             kRanks, s_.hidden);
        }
      }
    });
  }

  // Each PE's records for the other node (its first `tokens` landing rows) to the PE there, a
  // node's PEs one after the other on its stream.
  Timing cross_nodes() {
    const size_t bytes = s_.tokens * s_.row_bytes();
    return run_together(2 * kNodes, [&](size_t i) {
      const size_t node = i % kNodes;
      for (size_t local = 0; local < kRanks; ++local) {
        const size_t pe = node * kRanks + local;
        if (i < kNodes) {
          asio::write(senders_[node], asio::buffer(landing_[pe].data(), bytes));
        } else {
          asio::read(receivers_[node], asio::buffer(received_[pe].data(), bytes));
        }
      }
    });
  }

  // Each PE's tokens: the row from its own node's landing block and the one received.
  Timing home_sums() {
    return run_together(cpus_, [&](size_t thread) {
      const size_t row = s_.row_bytes();
      for (size_t pe = thread; pe < kPes; pe += cpus_) {
        for (size_t t = 0; t < s_.tokens; ++t) {
          const TypedRow rows[2] = {{landing_[pe].data() + (s_.tokens + t) * row, DType::kBF16},
                                    {received_[pe].data() + t * row, DType::kBF16}};
          reduce_rows(out_[pe].data() + t * row, DType::kBF16, rows, 2, s_.hidden);
        }
      }
    });
  }

 private:
  void connect_streams() {
    asio::ip::tcp::acceptor acceptor(io_, {asio::ip::make_address("127.0.0.1"), 0});
    for (int node = 0; node < kNodes; ++node) {
      senders_.emplace_back(io_);
      senders_.back().connect(acceptor.local_endpoint());
      receivers_.push_back(acceptor.accept());
      senders_.back().set_option(asio::ip::tcp::no_delay(true));
    }
  }

  Shape s_;
  size_t cpus_;
  std::vector<std::byte> expert_rows_[kPes], landing_[kPes], received_[kPes], out_[kPes];
  asio::io_context io_;
  std::vector<asio::ip::tcp::socket> senders_, receivers_;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace
}  // namespace symmesh

int main(int argc, char** argv) {
  using namespace symmesh;
  auto arg = [&](int i, size_t fallback) {
    return argc > i ? size_t(std::strtoull(argv[i], nullptr, 10)) : fallback;
  };
  const Shape shape{arg(1, 128), arg(2, 7168), arg(3, 8)};
  const int rounds = int(std::max<size_t>(3, arg(4, 20)));
  if (shape.tokens == 0 || shape.hidden == 0 || shape.topk % (kNodes * kRanks) != 0) {
    std::fprintf(stderr,
                 "low_latency_combine_work: tokens and hidden above 0, topk a multiple "
                 "of 4 (each record's rows split evenly over the node's 2 PEs)\n");
    return 2;
  }
  const size_t cpus = std::max<size_t>(1, allowed_cpus().size());
  CombineWork combine(shape, cpus);
  std::vector<Timing> phases[3];
  for (int round = 0; round < rounds + 1; ++round) {  // round 0 warms up
    combine.write_expert_rows(uint16_t(round));
    const Timing timings[3] = {combine.weighted_sums(), combine.cross_nodes(), combine.home_sums()};
    if (round == 0) continue;
    for (int p = 0; p < 3; ++p) phases[p].push_back(timings[p]);
  }
  const double row_mb = double(shape.row_bytes()) / 1e6;
  const double mb[3] = {row_mb * double(shape.expert_rows() * kPes),
                        row_mb * double(shape.tokens * kPes),
                        row_mb * double(shape.tokens * kPes * 2)};
  const char* names[3] = {"weighted node sums (expert rows read)",
                          "rows to the other node (loopback tcp)", "home sums (rows read)"};
  std::printf(
      "low-latency combine work: %zu tokens per PE x %zu, topk %zu, %d nodes x %d PEs "
      "on %zu CPUs, medians of %d rounds\n",
      shape.tokens, shape.hidden, shape.topk, kNodes, kRanks, cpus, rounds);
  std::printf("| %-40s | %8s | %8s | %8s |\n", "phase", "MB", "wall ms", "CPU ms");
  double cpu = 0;
  for (int p = 0; p < 3; ++p) {
    std::vector<double> walls, cpus;
    for (const Timing& t : phases[p]) {
      walls.push_back(t.wall);
      cpus.push_back(t.cpu);
    }
    cpu += median(cpus);
    std::printf("| %-40s | %8.1f | %8.3f | %8.3f |\n", names[p], mb[p], median(walls) * 1e3,
                median(cpus) * 1e3);
  }
  const double per_call = cpu / double(cpus);
  std::printf("work: %.3f ms of CPU over %zu CPUs = %.3f ms a call\n", cpu * 1e3, cpus,
              per_call * 1e3);
  return 0;
}
