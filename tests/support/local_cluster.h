// K nodes in one process, TCP on loopback (or verbs on a local RDMA device) between them:
// the runtime without the daemon, for the tests. Each run() is a
// fresh job: the wires are flushed, sync pools zeroed and allocations freed first, as the daemon
// does between jobs.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/node.h"
#include "runtime/pe.h"
#include "runtime/wire_set.h"
#include "transport/rdma.h"
#include "transport/tcp/tcp_transport.h"

namespace symmesh {

struct LocalClusterOptions {
  int nodes = 1;
  int ranks_per_node = 1;
  size_t heap_size = size_t{64} << 20;
  std::chrono::milliseconds wait_timeout{30000};
  std::string transport = "tcp";  // between nodes: tcp or verbs
  TcpOptions tcp;
  VerbsOptions verbs;
  std::string secret = "local-cluster";
};

// What the operator tests run on: `heap_per_rank` of heap for each of a node's `ranks`, one io
// thread a node, and a minute before a wait gives up.
LocalClusterOptions op_test_options(int nodes, int ranks, size_t heap_per_rank);

class LocalCluster {
 public:
  explicit LocalCluster(const LocalClusterOptions& options);
  ~LocalCluster();

  // Runs `body` on every PE, one thread each, and returns when all are done. If a PE
  // throws, the others are aborted and the first error is rethrown.
  void run(const std::function<void(Pe&)>& body);

  Node& node(int index) { return *nodes_.at(index); }
  // The one network transport of node `index` (a cluster of one kind).
  TcpTransport& tcp(int index) {
    return dynamic_cast<TcpTransport&>(*wires_.at(index).networks.at(0));
  }
  RdmaTransport& verbs(int index) {
    return dynamic_cast<RdmaTransport&>(*wires_.at(index).networks.at(0));
  }
  int n_pes() const { return options_.nodes * options_.ranks_per_node; }

 private:
  void connect_tcp();
  void connect_verbs();

  LocalClusterOptions options_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<WireSet> wires_;  // one per node
};

}  // namespace symmesh
