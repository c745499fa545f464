#include "client/output.h"

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/units.h"

namespace symmesh {

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
