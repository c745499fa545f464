// One interface for every way of moving bytes into a node's symmetric segment: `shm` for
// the PEs of this node, `tcp` and `verbs` for other nodes. Offsets are byte offsets
// into the destination node's segment; the runtime turns symmetric addresses into them.
// Every call is made by a PE thread and names it (src_pe) so that completion (quiet) and
// ordering (fence) are per PE, as OpenSHMEM defines them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "transport/peer_health.h"
#include "transport/peer_traffic.h"
#include "transport/wait.h"

namespace symmesh {

enum class SignalOp : uint8_t { kSet, kAdd };

// The 64-bit word a put_signal updates after its data, never before.
struct SignalUpdate {
  uint64_t offset = 0;
  uint64_t value = 0;
  SignalOp op = SignalOp::kSet;
};

// One piece of a put's source. A gathered put writes its pieces end to end at the destination,
// as writev does, so a caller sends records whose parts lie apart without copying them
// together first.
struct PutPiece {
  const void* data = nullptr;
  size_t length = 0;
};

// A node's symmetric segment as the transports see it.
struct SegmentView {
  std::byte* base = nullptr;
  size_t size = 0;
};

// The total length of a put's pieces.
inline size_t total_length(std::span<const PutPiece> pieces) {
  size_t length = 0;
  for (const PutPiece& piece : pieces) length += piece.length;
  return length;
}

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;

  // Writes the pieces end to end from `offset` of `node`'s segment, then applies `signal` if
  // given. Returns when the pieces may be reused (local completion); quiet() waits for
  // delivery.
  virtual void put_gather(int src_pe, int node, uint64_t offset, std::span<const PutPiece> source,
                          const SignalUpdate* signal) = 0;
  // A put of one piece: `length` bytes from `data`.
  void put(int src_pe, int node, uint64_t offset, const void* data, size_t length,
           const SignalUpdate* signal) {
    const PutPiece piece{data, length};
    put_gather(src_pe, node, offset, std::span(&piece, 1), signal);
  }
  // Reads `length` bytes at `offset` of `node`'s segment into `out`; returns when done.
  // A get of one 8-byte aligned word is an atomic read (signals and counters are read so).
  virtual void get(int src_pe, int node, uint64_t offset, void* out, size_t length) = 0;
  // 64-bit atomics on 8-byte aligned words.
  virtual void atomic_add(int src_pe, int node, uint64_t offset, uint64_t value) = 0;
  virtual uint64_t atomic_fetch_add(int src_pe, int node, uint64_t offset, uint64_t value) = 0;
  // Orders this PE's earlier puts to each node before its later ones.
  virtual void fence(int src_pe) = 0;
  // Returns when every put and atomic this PE issued has been applied at its target.
  virtual void quiet(int src_pe) = 0;
};

// A transport to other nodes (tcp, verbs): it can lose a peer, and between jobs it makes
// sure everything this node sent has landed. Peer health and traffic are kept the same way
// by every such transport.
class NetworkTransport : public Transport {
 public:
  explicit NetworkTransport(int nodes) : health_(nodes), traffic_(nodes) {}
  virtual void flush_all(Deadline deadline) = 0;
  // Folds into `policy` what a node that reaches some peer over this transport needs of its
  // waits (called once for each transport the node uses).
  virtual void shape_wait_policy(WaitPolicy& policy) { (void)policy; }
  // The transport this node's own PEs use instead of `shm` when some peer is reached over
  // this one; null when shm is right.
  virtual std::unique_ptr<Transport> own_node_transport(Transport& shm, SegmentView segment,
                                                        Doorbell& doorbell) {
    (void)shm, (void)segment, (void)doorbell;
    return nullptr;
  }
  // Called for each connection refused in its handshake (auth, bad_request, timeout), with
  // the kind of refusal; transports that accept no connections refuse none.
  virtual void on_refused(std::function<void(const std::string& kind)> callback) { (void)callback; }
  // Peers closing from now on are expected (the cluster is stopping): nothing is logged.
  virtual void expect_shutdown() {}
  // Closes every connection; the transport carries nothing after.
  virtual void shutdown() = 0;
  virtual bool peer_up(int node) const { return health_.up(node); }
  std::string peer_down_reason(int node) const { return health_.reason(node); }
  // Called once per lost peer, from a transport thread or the PE that saw it.
  void on_peer_down(PeerHealth::DownCallback callback) { health_.on_down(std::move(callback)); }
  const PeerTraffic& traffic() const { return traffic_; }

 protected:
  PeerHealth health_;
  PeerTraffic traffic_;
};

}  // namespace symmesh
