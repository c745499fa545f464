#include "runtime/node.h"

#include <algorithm>
#include <cstring>

#include "common/units.h"
#include "runtime/layout.h"

namespace symmesh {
namespace {

size_t slice_size(const NodeConfig& config) {
  if (config.ranks_per_node < 1 || config.ranks_per_node > 256) {
    throw InvalidArgument("ranks per node must be in 1..256, got " +
                          std::to_string(config.ranks_per_node));
  }
  if (config.nodes < 1 || config.node_rank < 0 || config.node_rank >= config.nodes) {
    throw InvalidArgument("node rank " + std::to_string(config.node_rank) + " is outside 0.." +
                          std::to_string(config.nodes - 1));
  }
  if (int64_t(config.nodes) * config.ranks_per_node > kMaxTeamSize) {
    throw InvalidArgument(
        "nodes x ranks per node = " + std::to_string(config.nodes * config.ranks_per_node) +
        " PEs; at most " + std::to_string(kMaxTeamSize) + " are supported");
  }
  const size_t minimum = minimum_heap_size(config.ranks_per_node);
  if (config.heap_size < minimum) {
    throw InvalidArgument("heap size " + format_bytes(config.heap_size) + " is too small for " +
                          std::to_string(config.ranks_per_node) + " ranks per node: at least " +
                          format_bytes(minimum) + " (" + format_bytes(kReservedBytes) +
                          " of sync pools and scratch plus " + format_bytes(kMinUserHeapBytes) +
                          " of heap per rank)");
  }
  return config.heap_size / config.ranks_per_node / kSliceAlignment * kSliceAlignment;
}

}  // namespace

size_t minimum_heap_size(int ranks_per_node) {
  return size_t(ranks_per_node) * (kReservedBytes + kMinUserHeapBytes);
}

Node::Node(const NodeConfig& config)
    : config_(config),
      slice_bytes_(slice_size(config)),
      segment_(slice_bytes_ * config.ranks_per_node,
               "symmesh-node" + std::to_string(config.node_rank)),
      shm_(segment_.view(), doorbell_, config.node_rank),
      transports_(config.nodes, nullptr),
      loans_(config.ranks_per_node) {
  transports_[config.node_rank] = &shm_;
  for (int i = 0; i < config.ranks_per_node; ++i) {
    allocators_.push_back(std::make_unique<HeapAllocator>(kReservedBytes, slice_bytes_));
  }
}

Transport& Node::transport_to(int node) {
  if (node < 0 || node >= nodes() || transports_[node] == nullptr) {
    throw InvalidArgument("node " + std::to_string(rank()) + " has no transport to node " +
                          std::to_string(node) + " (nodes 0.." + std::to_string(nodes() - 1) + ")");
  }
  return *transports_[node];
}

void Node::set_transport(int node, Transport* transport) {
  transports_.at(node) = transport;
}

void Node::detach_transports() {
  std::fill(transports_.begin(), transports_.end(), nullptr);
  transports_.at(rank()) = &shm_;
  wait_policy_ = WaitPolicy{};
}

std::string Node::transport_name(int node) const {
  const Transport* transport = transports_.at(node);
  return transport ? std::string(transport->name()) : "none";
}

void Node::reset_between_jobs() {
  for (int local = 0; local < ranks_per_node(); ++local) {
    std::memset(segment_.base() + local * slice_bytes_, 0, kSyncPoolBytes);
    allocators_[local]->reset();
  }
  doorbell_.clear_abort();
  loans_.reset();
}

size_t Node::heap_used() const {
  size_t used = 0;
  for (const auto& allocator : allocators_) used += allocator->used();
  return used;
}

size_t Node::heap_job_peak() const {
  size_t peak = 0;
  for (const auto& allocator : allocators_) peak += allocator->peak();
  return peak;
}

size_t Node::heap_capacity() const {
  size_t capacity = 0;
  for (const auto& allocator : allocators_) capacity += allocator->capacity();
  return capacity;
}

}  // namespace symmesh
