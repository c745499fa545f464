// A job on every PE of a 2 nodes x 2 ranks cluster over verbs (small heaps: the guest's memory
// is small), for the soft-RoCE op tests: returns PE 0's report.
#pragma once

#include <gtest/gtest.h>

#include <mutex>

#include "runtime/local_cluster.h"

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
  cluster.run([&](Pe& pe) {
    Report report = run_job(pe);
    std::lock_guard lock(mutex);
    if (pe.my_pe() == 0) first = std::move(report);
  });
  return first;
}

}  // namespace symmesh
