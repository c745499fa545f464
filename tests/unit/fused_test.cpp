// The fused operators: every op x dtype x mode on 1 to 3 nodes x 1 to 3 ranks, with
// ragged shapes (no dimension a multiple of a tile or of the PE count), verified against the
// f32 reference; stage / interval extremes and both stage transfers; several compute and comm
// threads; bitwise determinism across jobs; and the errors a bad job gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>

#include "common/streaming_copy.h"
#include "common/trace.h"
#include "jobs/fused/runner.h"
#include "ops/enum_words.h"
#include "tests/support/local_cluster.h"

namespace symmesh {
namespace {

struct Shape {
  int nodes;
  int ranks;
};

LocalClusterOptions cluster_options(Shape shape) {
  LocalClusterOptions o;
  o.nodes = shape.nodes;
  o.ranks_per_node = shape.ranks;
  o.heap_size = size_t(shape.ranks) * (24 << 20);
  o.wait_timeout = std::chrono::seconds(60);
  o.tcp.io_threads = 1;
  o.tcp.stripe_threshold = 16 << 10;  // the larger puts of these shapes stripe
  return o;
}

// A small ragged problem: nothing divides a tile or the PE count.
FusedJob small_job(FusedOp op, DType dtype) {
  FusedJob job;
  job.options.op = op;
  job.options.m = 53;
  job.options.n = 37;
  job.options.k = 29;
  job.options.dtype = dtype;
  job.options.tile_m = 8;
  job.options.tile_n = 16;
  job.options.tile_k = 12;
  job.options.subtile_m = 3;
  job.options.comm_interval = 2;
  job.iters = 2;
  job.verify = true;
  return job;
}

// Runs `job` on every PE of `cluster`; returns PE 0's report and checks all reports agree.
FusedReport run_job(LocalCluster& cluster, const FusedJob& job) {
  Gemm gemm;
  std::mutex mutex;
  std::vector<FusedReport> reports(cluster.n_pes());
  cluster.run([&](Pe& pe) {
    FusedReport report = run_fused_job(pe, gemm, job);
    std::lock_guard lock(mutex);
    reports[pe.my_pe()] = report;
  });
  for (const auto& r : reports) {
    EXPECT_EQ(r.verified, reports[0].verified);
    EXPECT_EQ(r.max_abs_err, reports[0].max_abs_err);
  }
  return reports[0];
}

void expect_correct(const FusedReport& r, const std::string& what) {
  EXPECT_TRUE(r.verified) << what << ": max_abs_err " << r.max_abs_err << " > tolerance "
                          << r.tolerance;
  EXPECT_TRUE(r.deterministic) << what;
  EXPECT_GT(r.compute_s, 0) << what;
}

class FusedShapes : public ::testing::TestWithParam<std::tuple<FusedOp, Shape>> {};

TEST_P(FusedShapes, EveryDtypeAndModeMatchesTheReference) {
  const auto [op, shape] = GetParam();
  LocalCluster cluster(cluster_options(shape));
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (FusedMode mode : {FusedMode::kBoth, FusedMode::kSequential}) {
      FusedJob job = small_job(op, dtype);
      job.mode = mode;
      const FusedReport r = run_job(cluster, job);
      expect_correct(r, wire::word(dtype) + " " + wire::word(mode));
      EXPECT_EQ(r.pipelined_s.has_value(), mode != FusedMode::kSequential);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ops, FusedShapes,
    ::testing::Combine(::testing::Values(FusedOp::kMatmulReduceScatter, FusedOp::kGemmAllreduce,
                                         FusedOp::kAllgatherMatmul),
                       ::testing::Values(Shape{1, 1}, Shape{1, 2}, Shape{1, 3}, Shape{2, 1},
                                         Shape{2, 3}, Shape{3, 1}, Shape{3, 2})),
    [](const auto& info) {
      std::string name = wire::word(std::get<0>(info.param));
      std::erase(name, '-');
      const Shape s = std::get<1>(info.param);
      return name + "_" + std::to_string(s.nodes) + "x" + std::to_string(s.ranks);
    });

TEST(MatmulReduceScatter, StagesIntervalsAndTransfers) {
  LocalCluster cluster(cluster_options({2, 2}));
  struct Case {
    int stages, interval;
    StageTransfer transfer;
  };
  // One stage (every round waits for the last), interval 1, interval beyond the tile count.
  for (const Case c : {Case{1, 1, StageTransfer::kPull}, Case{1, 1, StageTransfer::kPush},
                       Case{2, 1, StageTransfer::kPush}, Case{3, 2, StageTransfer::kPull},
                       Case{2, 1000, StageTransfer::kPull}, Case{2, 1000, StageTransfer::kPush}}) {
    FusedJob job = small_job(FusedOp::kMatmulReduceScatter, DType::kBF16);
    job.mode = FusedMode::kFused;
    job.options.stages = c.stages;
    job.options.comm_interval = c.interval;
    job.options.transfer = c.transfer;
    expect_correct(run_job(cluster, job), "stages " + std::to_string(c.stages) + " interval " +
                                              std::to_string(c.interval) + " " +
                                              wire::word(c.transfer));
  }
}

TEST(FusedThreads, SeveralComputeAndCommThreads) {
  LocalCluster cluster(cluster_options({2, 2}));
  for (FusedOp op :
       {FusedOp::kMatmulReduceScatter, FusedOp::kGemmAllreduce, FusedOp::kAllgatherMatmul}) {
    for (auto [compute, comm] : {std::pair{2, 1}, std::pair{3, 2}, std::pair{1, 3}}) {
      FusedJob job = small_job(op, DType::kF32);
      job.mode = FusedMode::kFused;
      job.options.compute_threads = compute;
      job.options.comm_threads = comm;
      job.options.transfer = comm == 2 ? StageTransfer::kPush : StageTransfer::kPull;
      expect_correct(run_job(cluster, job), wire::word(op) + " compute " + std::to_string(compute) +
                                                " comm " + std::to_string(comm));
    }
  }
}

// More compute threads than a round of matmul-reduce-scatter has tiles (2 PEs x 2 tiles a
// round, 7 threads): the rounds deal their tiles on where the last stopped, so every thread
// computes some, as each thread's track of the trace shows.
TEST(FusedThreads, EveryComputeThreadComputesTilesWhenARoundHasFewerTilesThanThreads) {
  constexpr int kThreads = 7;
  LocalCluster cluster(cluster_options({2, 1}));
  FusedJob job = small_job(FusedOp::kMatmulReduceScatter, DType::kBF16);
  job.mode = FusedMode::kFused;
  job.iters = 1;
  job.options.compute_threads = kThreads;
  ASSERT_LT(cluster.n_pes() * job.options.comm_interval, kThreads);
  Gemm gemm;
  std::mutex mutex;
  std::vector<std::map<std::string, int>> tiles(cluster.n_pes());
  std::vector<FusedReport> reports(cluster.n_pes());
  cluster.run([&](Pe& pe) {
    trace::Recorder recorder;
    {
      const trace::ThreadBinding bound({&recorder, pe.my_pe()}, "main");
      reports[pe.my_pe()] = run_fused_job(pe, gemm, job);
    }
    std::lock_guard lock(mutex);
    for (const trace::ThreadTrace& thread : recorder.threads()) {
      for (const trace::Span& span : thread.spans) {
        if (std::string(span.name) == "gemm tile") ++tiles[pe.my_pe()][thread.name];
      }
    }
  });
  for (int pe = 0; pe < cluster.n_pes(); ++pe) {
    expect_correct(reports[pe], "PE " + std::to_string(pe));
    for (int i = 0; i < kThreads; ++i) {
      EXPECT_GT(tiles[pe]["compute " + std::to_string(i)], 0) << "PE " << pe << " compute " << i;
    }
  }
}

// gemm-allreduce's reduce and all-gather unit: the whole tile (0, the default), one row, a
// ragged split, exactly a tile, more than a tile (clamped to it); whole tiles also over two and
// three comm threads.
TEST(GemmAllreduceSubtiles, EverySubtileHeightMatchesTheReference) {
  LocalCluster cluster(cluster_options({2, 2}));
  for (auto [subtile_m, comm_threads] :
       {std::pair<int64_t, int>{0, 1}, {1, 1}, {3, 1}, {8, 1}, {100, 1}, {0, 2}, {0, 3}}) {
    FusedJob job = small_job(FusedOp::kGemmAllreduce, DType::kBF16);
    job.mode = FusedMode::kFused;
    job.options.subtile_m = subtile_m;
    job.options.comm_threads = comm_threads;
    expect_correct(run_job(cluster, job), "subtile_m " + std::to_string(subtile_m) +
                                              " comm threads " + std::to_string(comm_threads));
  }
}

// A C past the cache share, which gemm-allreduce's comm threads write with streaming stores as
// the sums land: every element is checked against the reference.
TEST(GemmAllreduceSubtiles, ACPastTheCacheShareMatchesTheReference) {
  constexpr int64_t kN = 512;
  const int64_t m = int64_t(streaming_threshold() / (kN * sizeof(float))) + 37;  // ragged tiles
  if (m > 16384) GTEST_SKIP() << "the cache share needs too many rows";
  const size_t c_bytes = size_t(m * kN) * sizeof(float);
  ASSERT_TRUE(CopyInto(c_bytes).streaming()) << "the shape must take the streaming path";
  LocalClusterOptions options = cluster_options({2, 1});
  options.heap_size = 6 * c_bytes + (16 << 20);  // slots, sums, C and the job's tensors
  LocalCluster cluster(options);
  FusedJob job = small_job(FusedOp::kGemmAllreduce, DType::kBF16);
  job.options.m = m;
  job.options.n = kN;
  job.options.k = 16;
  job.options.tile_m = 256;
  job.options.tile_n = 256;
  job.options.tile_k = 16;
  job.options.subtile_m = 0;
  job.mode = FusedMode::kFused;
  job.iters = 1;
  expect_correct(run_job(cluster, job), "m " + std::to_string(m));
}

TEST(FusedShapesEdge, FewerRowsThanPesAndSingleElements) {
  LocalCluster cluster(cluster_options({1, 3}));
  for (FusedOp op :
       {FusedOp::kMatmulReduceScatter, FusedOp::kGemmAllreduce, FusedOp::kAllgatherMatmul}) {
    for (int64_t m : {1, 2, 4}) {  // PE 2 (and 1) own no rows
      FusedJob job = small_job(op, DType::kBF16);
      job.options.m = m;
      job.options.n = 1;
      job.options.k = 1;
      expect_correct(run_job(cluster, job), wire::word(op) + " m " + std::to_string(m));
    }
  }
}

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(FusedDeterminism, TwoJobsWriteBitwiseEqualOutputs) {
  LocalCluster cluster(cluster_options({2, 2}));
  const auto base =
      std::filesystem::temp_directory_path() / ("symmesh-fused-" + std::to_string(::getpid()));
  for (FusedOp op :
       {FusedOp::kMatmulReduceScatter, FusedOp::kGemmAllreduce, FusedOp::kAllgatherMatmul}) {
    std::vector<std::string> outputs;
    for (const char* run : {"first", "second"}) {
      FusedJob job = small_job(op, DType::kBF16);
      job.options.m = 301;
      job.options.k = 257;
      job.mode = FusedMode::kFused;
      job.output_dir = (base / run).string();
      std::filesystem::create_directories(job.output_dir);
      run_job(cluster, job);
      std::string all;
      for (int pe = 0; pe < cluster.n_pes(); ++pe) {
        all += file_bytes(base / run / ("C_" + std::to_string(pe) + ".npy"));
      }
      outputs.push_back(all);
    }
    EXPECT_GT(outputs[0].size(), 4u * 301 * 37 / 4);
    EXPECT_TRUE(outputs[0] == outputs[1]) << wire::word(op);
  }
  std::filesystem::remove_all(base);
}

TEST(FusedAuto, PlansOnceKeepsThePlanAndPlansAgainWhenThePesDisagree) {
  LocalCluster cluster(cluster_options({2, 2}));
  FusedModePlans plans;
  FusedJob job = small_job(FusedOp::kGemmAllreduce, DType::kBF16);
  job.mode = FusedMode::kAuto;
  job.iters = 3;
  job.plans = &plans;
  auto expect_chosen_is_the_jobs_time = [](const FusedReport& r) {
    ASSERT_TRUE(r.pipelined_s.has_value());  // auto measures both modes
    EXPECT_TRUE(r.chosen == FusedMode::kFused || r.chosen == FusedMode::kSequential);
    const double chosen_s = r.chosen == FusedMode::kFused ? *r.pipelined_s : r.sequential_s;
    std::vector<double> runs = r.iteration_s;
    std::sort(runs.begin(), runs.end());
    EXPECT_EQ(runs[1], chosen_s);  // the median of 3
  };
  const FusedReport first = run_job(cluster, job);
  expect_correct(first, "the planning job");
  EXPECT_TRUE(first.planned);
  expect_chosen_is_the_jobs_time(first);

  const FusedReport second = run_job(cluster, job);
  expect_correct(second, "a job with the plan kept");
  EXPECT_FALSE(second.planned);
  EXPECT_EQ(second.chosen, first.chosen);
  expect_chosen_is_the_jobs_time(second);

  // PE 1 has a table of its own, without the plan (as a restarted daemon): all plan again.
  FusedModePlans fresh;
  std::vector<FusedReport> reports(cluster.n_pes());
  cluster.run([&](Pe& pe) {
    FusedJob mine = job;
    if (pe.my_pe() == 1) mine.plans = &fresh;
    Gemm gemm;
    reports[pe.my_pe()] = run_fused_job(pe, gemm, mine);
  });
  for (const FusedReport& r : reports) {
    expect_correct(r, "a job after one PE lost its plan");
    EXPECT_TRUE(r.planned);
    EXPECT_EQ(r.chosen, reports[0].chosen);
  }
  EXPECT_EQ(fresh.size(), 1u);  // PE 1 keeps the new plan too
}

TEST(FusedAuto, ThePlansTableDropsItsLeastRecentlyUsedPlanWhenFull) {
  FusedModePlans plans(2);
  plans.store("a", FusedMode::kFused);
  plans.store("b", FusedMode::kSequential);
  plans.store("a", FusedMode::kSequential);  // replaced, not added
  EXPECT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans.find("b"), FusedMode::kSequential);  // now b is the more recent
  plans.store("c", FusedMode::kFused);
  EXPECT_EQ(plans.size(), 2u);
  EXPECT_EQ(plans.find("a"), std::nullopt);
  EXPECT_EQ(plans.find("b"), FusedMode::kSequential);
  EXPECT_EQ(plans.find("c"), FusedMode::kFused);
}

TEST(FusedAuto, TheFasterMedianWinsAndATieKeepsTheBaseline) {
  EXPECT_EQ(faster_mode({3, 3, 3}, {2, 2, 9}), FusedMode::kFused);
  EXPECT_EQ(faster_mode({2, 2, 9}, {3, 3, 3}), FusedMode::kSequential);
  EXPECT_EQ(faster_mode({1, 2, 3}, {3, 2, 1}), FusedMode::kSequential);
}

TEST(FusedErrors, BadOptionsNameTheFieldAndTheRange) {
  LocalCluster cluster(cluster_options({1, 2}));
  auto error_of = [&](auto mutate) {
    FusedJob job = small_job(FusedOp::kGemmAllreduce, DType::kF32);
    mutate(job);
    std::string message;
    cluster.run([&](Pe& pe) {
      Gemm gemm;
      try {
        run_fused_job(pe, gemm, job);
      } catch (const InvalidArgument& e) {
        if (pe.my_pe() == 0) message = e.what();
      }
    });
    return message;
  };
  EXPECT_NE(error_of([](FusedJob& j) { j.options.m = 0; }).find("m = 0 is out of range: allowed 1"),
            std::string::npos);
  EXPECT_NE(error_of([](FusedJob& j) { j.options.tile_n = 0; }).find("tile_n = 0"),
            std::string::npos);
  EXPECT_NE(error_of([](FusedJob& j) { j.options.comm_threads = 65; }).find("comm_threads = 65"),
            std::string::npos);
  EXPECT_NE(error_of([](FusedJob& j) { j.options.subtile_m = -1; }).find("subtile_m = -1"),
            std::string::npos);
  EXPECT_NE(error_of([](FusedJob& j) { j.iters = 0; }).find("iters = 0"), std::string::npos);
  EXPECT_NE(error_of([](FusedJob& j) { j.inputs.dir = "/nonexistent"; }).find("A_0.npy"),
            std::string::npos);
  EXPECT_THROW(wire::parse_word<FusedOp>("matmul", "--op"), InvalidArgument);
  EXPECT_THROW(wire::parse_word<StageTransfer>("pushpull", "--transfer"), InvalidArgument);
}

TEST(FusedErrors, AHeapTooSmallNamesTheWorkspaceAndLeavesTheClusterUsable) {
  LocalClusterOptions options = cluster_options({1, 2});
  options.heap_size = minimum_heap_size(2) + (4 << 20);
  LocalCluster cluster(options);
  FusedJob job = small_job(FusedOp::kMatmulReduceScatter, DType::kF32);
  job.options.tile_m = 1024;
  job.options.tile_n = 1024;
  job.options.comm_interval = 8;
  std::string message;
  cluster.run([&](Pe& pe) {
    Gemm gemm;
    try {
      run_fused_job(pe, gemm, job);
    } catch (const HeapExhausted& e) {
      if (pe.my_pe() == 0) message = e.what();
    }
  });
  EXPECT_NE(message.find("matmul-reduce-scatter workspace"), std::string::npos) << message;
  EXPECT_NE(message.find("--heap-size"), std::string::npos) << message;
  expect_correct(run_job(cluster, small_job(FusedOp::kMatmulReduceScatter, DType::kF32)),
                 "after the failure");
}

}  // namespace
}  // namespace symmesh
