// A process's handle on its PE: attach to the node's daemon, allocate tensors on the
// symmetric heap (mapped into this process, so calls on them copy nothing), and make calls
// the daemon carries out for this PE: barrier, collectives. Calls are blocking and go through
// the PE's request ring (api/request_ring.h), not a socket.
//
// The heap is symmetric as in OpenSHMEM: every PE makes the same malloc calls in the same
// order, so an allocation has the same offset everywhere; collectives take heap tensors.
//
// Errors: InvalidArgument for a call that is wrong (a pointer off the heap, a count of 0),
// checked here before anything is sent; Error (PeerError, TimeoutError) for one the cluster
// could not carry out, with the daemon's message.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "api/request_ring.h"
#include "transport/channel.h"
#include "wire/jobs.pb.h"

namespace symmesh {

struct SessionPlace {
  int rank = 0;  // this PE, 0..world_size-1
  int world_size = 1;
  int local_rank = 0;  // on this node
  int local_size = 1;
  int node_rank = 0;
};

class Session {
 public:
  // Attaches to the daemon's attach socket as `local_rank`, within `timeout`.
  static std::unique_ptr<Session> attach(const std::string& socket_path, int local_rank,
                                         std::chrono::milliseconds timeout);
  // Attaches as `symmesh launch` says: SYMMESH_ATTACH_SOCKET and SYMMESH_LOCAL_RANK.
  static std::unique_ptr<Session> attach_from_environment();
  ~Session();  // detaches
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const SessionPlace& place() const { return place_; }

  // Symmetric heap.
  void* malloc(size_t bytes);
  void free(void* address);
  bool on_heap(const void* address, size_t bytes) const;

  void barrier();
  // In place: data[0, count) becomes the reduction over every PE.
  void all_reduce(void* data, size_t count, wire::DataType dtype,
                  wire::Reduction op = wire::REDUCTION_SUM);
  // dst receives this PE's block of the reduction: elements [r*count/n, (r+1)*count/n).
  void reduce_scatter(void* dst, const void* src, size_t count, wire::DataType dtype,
                      wire::Reduction op = wire::REDUCTION_SUM);
  // dst[i*count, (i+1)*count) = PE i's src.
  void all_gather(void* dst, const void* src, size_t count, wire::DataType dtype);
  // src holds world_size blocks of `count` elements, block j for PE j; dst block i is PE i's.
  void all_to_all(void* dst, const void* src, size_t count, wire::DataType dtype);
  // A call that does nothing: the round trip through the daemon.
  void ping();

 private:
  Session() = default;
  uint64_t call(const attach::Request& request);
  uint64_t offset_of(const void* address, size_t bytes, const char* what) const;
  std::string closed_reason() const;

  SessionPlace place_;
  std::unique_ptr<BlockingChannel> connection_;
  std::byte* segment_ = nullptr;
  size_t segment_bytes_ = 0;
  std::byte* slice_ = nullptr;
  size_t slice_bytes_ = 0;
  attach::Ring* ring_ = nullptr;
  std::chrono::milliseconds call_timeout_{std::chrono::minutes(10)};
  bool detached_ = false;
};

}  // namespace symmesh
