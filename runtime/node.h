// One node's share of the runtime: its segment (one slice per local rank), the doorbell its
// PEs wait on, an allocator per local rank, and the transport used to reach each node.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "runtime/barrier_options.h"
#include "runtime/heap_allocator.h"
#include "runtime/local_loans.h"
#include "runtime/segment.h"
#include "transport/shm/shm_transport.h"
#include "transport/wait.h"

namespace symmesh {

struct NodeConfig {
  int node_rank = 0;
  int nodes = 1;
  int ranks_per_node = 1;
  size_t heap_size = size_t{64} << 20;
  std::chrono::milliseconds wait_timeout{60000};
  BarrierOptions barrier;  // what a barrier that names no algorithm runs
};

// The smallest --heap-size that leaves every local rank kMinUserHeapBytes of user heap.
size_t minimum_heap_size(int ranks_per_node);

class Node {
 public:
  explicit Node(const NodeConfig& config);

  const NodeConfig& config() const { return config_; }
  int rank() const { return config_.node_rank; }
  int nodes() const { return config_.nodes; }
  int ranks_per_node() const { return config_.ranks_per_node; }
  int n_pes() const { return config_.nodes * config_.ranks_per_node; }
  size_t slice_bytes() const { return slice_bytes_; }
  SegmentView segment() const { return segment_.view(); }
  const SharedSegment& shared_segment() const { return segment_; }
  Doorbell& doorbell() { return doorbell_; }
  HeapAllocator& allocator(int local_rank) { return *allocators_.at(local_rank); }
  // Private memory this node's PEs lend each other for one call.
  LocalLoans& loans() { return loans_; }
  std::chrono::milliseconds wait_timeout() const { return config_.wait_timeout; }
  // How this node's PEs wait (spin, yield, park). A node that reaches a peer over verbs
  // yields longer before parking: RDMA lands with no CPU at the target, and waking a
  // parked PE then takes two thread switches (the notifier, then the PE).
  const WaitPolicy& wait_policy() const { return wait_policy_; }
  void set_wait_policy(const WaitPolicy& policy) { wait_policy_ = policy; }

  // The transport to `node` (the shm transport for this node).
  Transport& transport_to(int node);
  void set_transport(int node, Transport* transport);
  // Back to no transport to other nodes and shm to this one (their transports are closing).
  void detach_transports();
  std::string transport_name(int node) const;

  // Between jobs, with no PE running and the wires flushed: zero every sync pool, free every
  // symmetric allocation, clear an abort.
  void reset_between_jobs();
  size_t heap_used() const;
  // The running job's highest heap use (its rings, workspaces and buffers), or the last job's
  // once it ended: allocators are reset only when the next job starts.
  size_t heap_job_peak() const;
  size_t heap_capacity() const;

 private:
  NodeConfig config_;
  size_t slice_bytes_;
  SharedSegment segment_;
  Doorbell doorbell_;
  ShmTransport shm_;
  std::vector<Transport*> transports_;
  WaitPolicy wait_policy_;
  std::vector<std::unique_ptr<HeapAllocator>> allocators_;
  LocalLoans loans_;
};

}  // namespace symmesh
