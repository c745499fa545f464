// A job on every PE of a 2 nodes x 2 ranks cluster over verbs (small heaps: the guest's memory
// is small), for the soft-RoCE op tests: returns PE 0's report, or fails the test with every
// PE's error and returns an empty report.
#pragma once

#include <gtest/gtest.h>

#include <mutex>
#include <string>

#include "tests/support/local_cluster.h"

namespace symmesh {

template <class Report, class RunJob>
Report pe0_report_over_verbs(RunJob&& run_job) {
  LocalClusterOptions o;
  o.nodes = 2;
  o.ranks_per_node = 2;
  o.heap_size = size_t(2) * (24 << 20);
  o.wait_timeout = std::chrono::seconds(60);
  o.transport = "verbs";
  LocalCluster cluster(o);
  EXPECT_EQ(cluster.node(0).transport_name(1), "verbs");
  std::mutex mutex;
  Report first;
  std::string errors;  // every PE's: the first is often a peer's timeout, not the cause
  try {
    cluster.run([&](Pe& pe) {
      try {
        Report report = run_job(pe);
        std::lock_guard lock(mutex);
        if (pe.my_pe() == 0) first = std::move(report);
      } catch (const std::exception& e) {
        std::lock_guard lock(mutex);
        errors += "\n  PE " + std::to_string(pe.my_pe()) + ": " + e.what();
        throw;
      }
    });
  } catch (const std::exception&) {
    ADD_FAILURE() << "the job failed on" << errors;
  }
  return first;
}

}  // namespace symmesh
