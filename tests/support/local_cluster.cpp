#include "tests/support/local_cluster.h"

#include <exception>
#include <mutex>
#include <thread>

namespace symmesh {

LocalCluster::LocalCluster(const LocalClusterOptions& options) : options_(options) {
  if (options.transport != "tcp" && options.transport != "verbs") {
    throw InvalidArgument("local cluster transport '" + options.transport +
                          "' is unknown (allowed: tcp, verbs)");
  }
  for (int n = 0; n < options.nodes; ++n) {
    NodeConfig config;
    config.node_rank = n;
    config.nodes = options.nodes;
    config.ranks_per_node = options.ranks_per_node;
    config.heap_size = options.heap_size;
    config.wait_timeout = options.wait_timeout;
    nodes_.push_back(std::make_unique<Node>(config));
  }
  if (options.nodes == 1) return;
  wires_.resize(options.nodes);
  if (options.transport == "verbs") {
    connect_verbs();
  } else {
    connect_tcp();
  }
}

void LocalCluster::connect_tcp() {
  std::vector<HostPort> endpoints;
  for (int n = 0; n < options_.nodes; ++n) {
    TcpOptions tcp = options_.tcp;
    tcp.op_timeout = options_.wait_timeout;
    wires_[n].networks.push_back(std::make_unique<TcpTransport>(
        n, options_.nodes, options_.ranks_per_node, nodes_[n]->segment(), nodes_[n]->doorbell(),
        options_.secret, tcp));
    endpoints.push_back(this->tcp(n).listen(HostPort{"127.0.0.1", 0}));
  }
  const Deadline deadline = deadline_after(options_.wait_timeout);
  std::vector<std::thread> connectors;
  std::vector<std::exception_ptr> errors(options_.nodes);
  for (int n = 0; n < options_.nodes; ++n) {
    connectors.emplace_back([&, n] {
      try {
        this->tcp(n).connect(endpoints, deadline);
      } catch (...) {
        errors[n] = std::current_exception();
      }
    });
  }
  for (auto& thread : connectors) thread.join();
  for (auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  for (int n = 0; n < options_.nodes; ++n) {
    wires_[n].attach(*nodes_[n], std::vector<int>(options_.nodes, 0));
  }
}

void LocalCluster::connect_verbs() {
  std::vector<wire::VerbsInfo> infos;
  for (int n = 0; n < options_.nodes; ++n) {
    VerbsOptions verbs = options_.verbs;
    verbs.op_timeout = options_.wait_timeout;
    wires_[n].networks.push_back(open_verbs_transport(n, options_.nodes, options_.ranks_per_node,
                                                      nodes_[n]->segment(), nodes_[n]->doorbell(),
                                                      verbs));
    infos.push_back(this->verbs(n).local_info());
  }
  for (int n = 0; n < options_.nodes; ++n) {
    for (int peer = 0; peer < options_.nodes; ++peer) {
      if (peer != n) verbs(n).connect(peer, infos[peer]);
    }
    wires_[n].attach(*nodes_[n], std::vector<int>(options_.nodes, 0));
  }
}

LocalCluster::~LocalCluster() {
  // Before any closes: no node logs the others.
  for (auto& wires : wires_) {
    for (auto& network : wires.networks) network->expect_shutdown();
  }
  for (int n = 0; n < static_cast<int>(wires_.size()); ++n) wires_[n].shutdown(*nodes_[n]);
}

void LocalCluster::run(const std::function<void(Pe&)>& body) {
  // A fresh job: everything sent before has landed, then every sync pool is cleared. No PE runs
  // between jobs, so the previous job's abort must not cut the flush short.
  for (auto& node : nodes_) node->doorbell().clear_abort();
  for (auto& wires : wires_) wires.flush_all(deadline_after(options_.wait_timeout));
  for (auto& node : nodes_) node->reset_between_jobs();

  std::mutex mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  for (auto& node : nodes_) {
    for (int local = 0; local < options_.ranks_per_node; ++local) {
      threads.emplace_back([&, node = node.get(), local] {
        try {
          Pe pe(*node, local);
          body(pe);
          pe.quiet();
        } catch (...) {
          std::lock_guard lock(mutex);
          if (!first_error) {
            first_error = std::current_exception();
            std::string reason = "another PE failed";
            try {
              std::rethrow_exception(first_error);
            } catch (const std::exception& e) {
              reason = std::string("PE on node ") + std::to_string(node->rank()) +
                       " failed: " + e.what();
            }
            for (auto& other : nodes_) other->doorbell().abort(reason);
          }
        }
      });
    }
  }
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

LocalClusterOptions op_test_options(int nodes, int ranks, size_t heap_per_rank) {
  LocalClusterOptions o;
  o.nodes = nodes;
  o.ranks_per_node = ranks;
  o.heap_size = size_t(ranks) * heap_per_rank;
  o.wait_timeout = std::chrono::seconds(60);
  o.tcp.io_threads = 1;
  return o;
}

}  // namespace symmesh
