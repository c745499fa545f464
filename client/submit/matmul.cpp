// symmesh submit matmul: a fused matmul + collective operator against its sequential baseline.
#include <cstdio>

#include "client/submit/submit_kind.h"
#include "common/units.h"

namespace symmesh {

namespace {

void print_matmul(const wire::JobResult& result) {
  const wire::MatmulFigures& f = result.figures().matmul();
  std::printf("job %llu  %s %s  %s  mode %s  %u iters (medians)\n",
              static_cast<unsigned long long>(result.job_id()), result.op().c_str(),
              result.dtype().c_str(), shape_text(result).c_str(), wire::enum_text(f.mode()).c_str(),
              result.iters());
  if (f.mode() == wire::MATMUL_MODE_AUTO) {
    std::printf("  auto        runs %s (%s)\n", wire::enum_text(f.chosen()).c_str(),
                f.planned() ? "planned from this job's runs" : "the plan an earlier run made");
  }
  std::printf("  gemm        %s\n", f.gemm_path().c_str());
  std::printf("  threads     %u compute + %u comm per PE\n", f.compute_threads(), f.comm_threads());
  std::printf("  compute     %10.3f ms  (%.1f GFLOP/s per PE)\n", f.compute_s() * 1e3,
              f.compute_gflops());
  std::printf("  comm        %10.3f ms  (%.3f ms of CPU per node)\n", f.comm_s() * 1e3,
              f.comm_cpu_s() * 1e3);
  std::printf("  sequential  %10.3f ms\n", f.sequential_s() * 1e3);
  if (f.has_pipelined_s()) {
    std::printf("  pipelined   %10.3f ms  speedup %.3fx  saved %.3f ms  overlap %.1f%%\n",
                f.pipelined_s() * 1e3, f.speedup(), f.time_saved_s() * 1e3,
                f.overlap_efficiency() * 100);
    std::printf("  fused GEMM  %10.3f ms  (%.1f GFLOP/s, %.2fx the standalone time)\n",
                f.fused_compute_s() * 1e3, f.fused_gemm_gflops(), f.compute_slowdown());
  }
  std::printf("  wire        %s per PE, %.3f GB/s   %s\n", format_bytes(f.wire_bytes()).c_str(),
              f.wire_gbps(), f.deterministic() ? "deterministic" : "NOT DETERMINISTIC");
  if (result.verify_requested()) {
    std::printf("  %s  max abs err %g, rel %g, tolerance %g\n",
                result.verified() ? "verified" : "NOT VERIFIED", result.max_abs_err(),
                f.max_rel_err(), f.tolerance());
  }
}

}  // namespace

SubmitKind matmul_kind() {
  constexpr uint64_t kMaxDim = uint64_t{1} << 20;
  return {
      .name = "matmul",
      .help = "a fused matmul + collective operator against its sequential baseline",
      .message = "matmul",
      .options =
          {
              {.flag = "--op", .field = "op", .help = "the fused operator", .required = true},
              {.flag = "--m",
               .field = "m",
               .help = "rows of A and C (allgather-matmul: of the gathered A)",
               .accepts = in_range(1, kMaxDim),
               .required = true},
              {.flag = "--n",
               .field = "n",
               .help = "columns of B and C",
               .accepts = in_range(1, kMaxDim),
               .required = true},
              {.flag = "--k",
               .field = "k",
               .help = "columns of A, rows of B",
               .accepts = in_range(1, kMaxDim),
               .required = true},
              {.flag = "--dtype",
               .field = "dtype",
               .help = "input type (accumulation is f32)",
               .fallback = "bf16"},
              {.flag = "--mode",
               .field = "mode",
               .help = "fused, sequential (GEMM then collective), both, or auto (both measured, "
                       "the faster planned once per shape and kept by the daemons)",
               .fallback = "both"},
              {.flag = "--stages",
               .field = "stages",
               .help = "matmul-reduce-scatter workspace stages (1..8)",
               .fallback = "2",
               .accepts = in_range(1, 8)},
              {.flag = "--comm-interval",
               .field = "comm_interval",
               .help = "matmul-reduce-scatter: tiles per destination rank per stage (1..4096)",
               .fallback = "2",
               .accepts = in_range(1, 4096)},
              {.flag = "--transfer",
               .field = "transfer",
               .help = "matmul-reduce-scatter: pull or push stages",
               .fallback = "pull"},
              {.flag = "--tile-m",
               .field = "tile_m",
               .help = "tile rows (1..4096)",
               .fallback = "256",
               .accepts = in_range(1, 4096)},
              {.flag = "--tile-n",
               .field = "tile_n",
               .help = "tile columns (1..4096)",
               .fallback = "512",
               .accepts = in_range(1, 4096)},
              {.flag = "--tile-k",
               .field = "tile_k",
               .help = "K step of a tile (0: all of K)",
               .fallback = "0"},
              {.flag = "--subtile-m",
               .field = "subtile_m",
               .help = "gemm-allreduce: rows per reduce and all-gather unit (0: the whole tile; "
                       "1..4096)",
               .fallback = "0",
               .accepts = in_range(0, 4096)},
              {.flag = "--compute-threads",
               .field = "compute_threads",
               .help = "GEMM threads per PE (1..64; default: the node's split of its CPUs, "
                       "which symmesh status shows)",
               .accepts = in_range(1, 64)},
              {.flag = "--comm-threads",
               .field = "comm_threads",
               .help = "communication threads per PE (1..64; default: the node's split)",
               .accepts = in_range(1, 64)},
              {.flag = "--iters",
               .field = "iters",
               .help = "timed runs per mode, after a warm-up (1..1000)",
               .fallback = "5",
               .accepts = in_range(1, 1000)},
              {.flag = "--seed",
               .field = "seed",
               .help = "seed of the generated inputs",
               .fallback = "1"},
              {.flag = "--verify",
               .field = "verify",
               .help = "check every PE's output against the f32 reference"},
              {.flag = "--inputs",
               .field = "inputs",
               .help =
                   "directory of A_<pe>.npy and B.npy, read by every daemon on its host, inside "
                   "its --data-dir (a relative path is taken from there)"},
              {.flag = "--output",
               .field = "output",
               .help = "directory each daemon writes C_<pe>.npy (gather_out_<pe>.npy) into, inside "
                       "its --data-dir"},
          },
      .print = print_matmul};
}

}  // namespace symmesh
