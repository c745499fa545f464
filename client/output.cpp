#include "client/output.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/units.h"

namespace symmesh {

namespace {

void add_matmul_json(const wire::JobResult& result, nlohmann::json& out) {
  const wire::MatmulFigures& f = result.matmul();
  const nlohmann::json absent;  // null: a figure the mode did not measure
  out["op"] = result.op();
  out["dtype"] = result.dtype();
  out["mode"] = f.mode();
  out["transfer"] = f.transfer();
  if (!result.verify_requested()) {
    out["verified"] = absent;
    out["max_abs_err"] = absent;
  }
  out["max_rel_err"] = result.verify_requested() ? nlohmann::json(f.max_rel_err()) : absent;
  out["tolerance"] = result.verify_requested() ? nlohmann::json(f.tolerance()) : absent;
  out["deterministic"] = f.deterministic();
  out["compute_s"] = f.compute_s();
  out["comm_s"] = f.comm_s();
  out["comm_cpu_s"] = f.comm_cpu_s();
  out["sequential_s"] = f.sequential_s();
  const bool fused = f.pipelined();
  out["pipelined_s"] = fused ? nlohmann::json(f.pipelined_s()) : absent;
  out["speedup"] = fused ? nlohmann::json(f.speedup()) : absent;
  out["time_saved_s"] = fused ? nlohmann::json(f.time_saved_s()) : absent;
  out["overlap_efficiency"] = fused ? nlohmann::json(f.overlap_efficiency()) : absent;
  out["fused_compute_s"] = fused ? nlohmann::json(f.fused_compute_s()) : absent;
  out["compute_slowdown"] = fused ? nlohmann::json(f.compute_slowdown()) : absent;
  out["fused_gemm_gflops"] = fused ? nlohmann::json(f.fused_gemm_gflops()) : absent;
  out["gflops"] = f.gflops();
  out["compute_gflops"] = f.compute_gflops();
  out["wire_gbps"] = f.wire_gbps();
  out["wire_bytes"] = f.wire_bytes();
  out["gemm_path"] = f.gemm_path();
}

void print_matmul(const wire::JobResult& result) {
  const wire::MatmulFigures& f = result.matmul();
  std::printf("job %llu  %s %s  %u nodes x %u PEs  mode %s  %u iters (medians)\n",
              static_cast<unsigned long long>(result.job_id()), result.op().c_str(),
              result.dtype().c_str(), result.nodes(), result.pes() / std::max(1u, result.nodes()),
              f.mode().c_str(), result.iters());
  std::printf("  gemm        %s\n", f.gemm_path().c_str());
  std::printf("  compute     %10.3f ms  (%.1f GFLOP/s per PE)\n", f.compute_s() * 1e3,
              f.compute_gflops());
  std::printf("  comm        %10.3f ms  (%.3f ms of CPU per node)\n", f.comm_s() * 1e3,
              f.comm_cpu_s() * 1e3);
  std::printf("  sequential  %10.3f ms\n", f.sequential_s() * 1e3);
  if (f.pipelined()) {
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

void print_error_json(const std::string& error) {
  std::cout << nlohmann::json{{"status", "error"}, {"error", error}}.dump() << "\n";
}

void print_status(const wire::StatusReply& status, bool json) {
  if (json) {
    nlohmann::json out{{"status", "ok"},
                       {"node_rank", status.node_rank()},
                       {"nodes", status.nodes()},
                       {"ranks_per_node", status.ranks_per_node()},
                       {"state", status.state()},
                       {"heap_size", status.heap_size()},
                       {"heap_used", status.heap_used()},
                       {"jobs_run", status.jobs_run()},
                       {"jobs_failed", status.jobs_failed()},
                       {"jobs_queued", status.jobs_queued()},
                       {"version", status.version()},
                       {"uptime_s", status.uptime_s()}};
    out["cluster"] = nlohmann::json::array();
    for (const auto& node : status.node()) {
      out["cluster"].push_back({{"node_rank", node.node_rank()},
                                {"hostname", node.hostname()},
                                {"control_endpoint", node.control_endpoint()},
                                {"ranks", node.ranks()}});
    }
    out["peers"] = nlohmann::json::array();
    for (const auto& peer : status.peer()) {
      out["peers"].push_back({{"node_rank", peer.node_rank()},
                              {"transport", peer.transport()},
                              {"reason", peer.reason()},
                              {"up", peer.up()},
                              {"data_endpoint", peer.data_endpoint()}});
    }
    std::cout << out.dump() << "\n";
    return;
  }
  std::printf(
      "node %u of %u: %s, %u ranks per node, heap %s used of %s, jobs run %llu "
      "(%llu failed, %u queued)\n",
      status.node_rank(), status.nodes(), status.state().c_str(), status.ranks_per_node(),
      format_bytes(status.heap_used()).c_str(), format_bytes(status.heap_size()).c_str(),
      static_cast<unsigned long long>(status.jobs_run()),
      static_cast<unsigned long long>(status.jobs_failed()), status.jobs_queued());
  std::printf("%-5s %-20s %-22s %s\n", "NODE", "HOST", "CONTROL", "RANKS");
  for (const auto& node : status.node()) {
    std::printf("%-5u %-20s %-22s %u\n", node.node_rank(), node.hostname().c_str(),
                node.control_endpoint().c_str(), node.ranks());
  }
  if (status.peer_size() == 0) return;
  std::printf("%-5s %-9s %-5s %-22s %s\n", "PEER", "TRANSPORT", "UP", "DATA", "WHY");
  for (const auto& peer : status.peer()) {
    std::printf("%-5u %-9s %-5s %-22s %s\n", peer.node_rank(), peer.transport().c_str(),
                peer.up() ? "yes" : "no", peer.data_endpoint().c_str(), peer.reason().c_str());
  }
}

void print_result(const wire::JobResult& result, bool json) {
  if (json) {
    nlohmann::json out{{"status", result.ok() ? "ok" : "error"}};
    if (!result.ok()) out["error"] = result.error();
    if (result.job_id()) out["job_id"] = result.job_id();
    if (!result.kind().empty()) {
      out["kind"] = result.kind();
      out["algo"] = result.algo();
      out["iters"] = result.iters();
      out["pes"] = result.pes();
      out["nodes"] = result.nodes();
      out["median_s"] = result.median_s();
      out["p50_us"] = result.p50_us();
      out["p99_us"] = result.p99_us();
    }
    if (result.kind() == "transport") {
      out["op"] = result.op();
      out["bytes"] = result.bytes();
      out["transport"] = result.transport();
      out["gbps"] = result.algbw_gbps();
    }
    if (result.kind() == "collective") {
      out["op"] = result.op();
      out["dtype"] = result.dtype();
      out["bytes"] = result.bytes();
      out["algbw_gbps"] = result.algbw_gbps();
      out["busbw_gbps"] = result.busbw_gbps();
    }
    if (result.verify_requested()) {
      out["verified"] = result.verified();
      out["max_abs_err"] = result.max_abs_err();
    }
    if (result.kind() == "matmul") add_matmul_json(result, out);
    if (result.kind() == "dispatch" || result.kind() == "combine") {
      const wire::MoeFigures& f = result.moe();
      out["tolerance"] = f.tolerance();
      out["deterministic"] = f.deterministic();
      out["tokens_per_s"] = f.tokens_per_s();
      out["algbw_gbps"] = f.algbw_gbps();
      out["inter_node_bytes"] = f.inter_node_bytes();
      out["intra_node_bytes"] = f.intra_node_bytes();
      out["flat_inter_node_bytes"] = f.flat_inter_node_bytes();
    }
    std::cout << out.dump() << "\n";
    return;
  }
  if (!result.ok()) {
    std::fprintf(stderr, "symmesh: job %llu failed: %s\n",
                 static_cast<unsigned long long>(result.job_id()), result.error().c_str());
    return;
  }
  if (result.kind() == "barrier") {
    std::printf(
        "job %llu  barrier %-13s %u nodes x %u PEs  %u iters  median %.1f us  p99 %.1f us\n",
        static_cast<unsigned long long>(result.job_id()), result.algo().c_str(), result.nodes(),
        result.pes() / std::max(1u, result.nodes()), result.iters(), result.p50_us(),
        result.p99_us());
    return;
  }
  if (result.kind() == "matmul") {
    print_matmul(result);
    return;
  }
  if (result.kind() == "dispatch" || result.kind() == "combine") {
    const wire::MoeFigures& f = result.moe();
    std::printf(
        "job %llu  %s %s  %u nodes x %u PEs  %u iters  median %.3f ms  %.0f tokens/s  "
        "%.3f GB/s  inter-node %s (flat %s)  %s",
        static_cast<unsigned long long>(result.job_id()), result.kind().c_str(),
        result.algo().c_str(), result.nodes(), result.pes() / std::max(1u, result.nodes()),
        result.iters(), result.median_s() * 1e3, f.tokens_per_s(), f.algbw_gbps(),
        format_bytes(uint64_t(f.inter_node_bytes())).c_str(),
        format_bytes(uint64_t(f.flat_inter_node_bytes())).c_str(),
        f.deterministic() ? "deterministic" : "NOT DETERMINISTIC");
    if (result.verify_requested()) {
      std::printf("  %s (max abs err %g)", result.verified() ? "verified" : "NOT VERIFIED",
                  result.max_abs_err());
    }
    std::printf("\n");
    return;
  }
  if (result.kind() == "transport") {
    std::printf("job %llu  %s %s over %s  %u iters  median %.1f us  p99 %.1f us  %.3f GB/s\n",
                static_cast<unsigned long long>(result.job_id()), result.op().c_str(),
                format_bytes(result.bytes()).c_str(), result.transport().c_str(), result.iters(),
                result.p50_us(), result.p99_us(), result.algbw_gbps());
    return;
  }
  std::printf(
      "job %llu  %s %s %s (%s)  %u PEs  %u iters  median %.3f ms  algbw %.2f GB/s  "
      "busbw %.2f GB/s",
      static_cast<unsigned long long>(result.job_id()), result.op().c_str(),
      format_bytes(result.bytes()).c_str(), result.dtype().c_str(), result.algo().c_str(),
      result.pes(), result.iters(), result.median_s() * 1e3, result.algbw_gbps(),
      result.busbw_gbps());
  if (result.verify_requested()) {
    std::printf("  %s (max abs err %g)", result.verified() ? "verified" : "NOT VERIFIED",
                result.max_abs_err());
  }
  std::printf("\n");
}

}  // namespace symmesh
