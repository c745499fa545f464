// The verbs transport's address: what a peer needs to reach this node over RDMA, sent in
// the bootstrap hello. It names the device's port, GID, LID and path MTU, the registered
// segment (address, rkey, length) and, for every (local rank, peer node), the number and
// first packet sequence number of the queue pair waiting for that peer's same local rank.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "transport/transport.h"
#include "transport/verbs/device.h"
#include "transport/verbs/pair.h"
#include "wire/bootstrap.pb.h"

namespace symmesh {

inline constexpr uint32_t kVerbsProtocolVersion = 1;

// This node's address. `pair(local, peer)` is local rank `local`'s queue pair to `peer`.
wire::VerbsInfo verbs_address(const VerbsDevice& device, const SegmentView& segment, uint32_t rkey,
                              int node, int nodes, int ranks_per_node,
                              const std::function<const VerbsPair&(int local, int peer)>& pair);

// A peer's address as this node uses it.
struct VerbsPeerAddress {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint64_t length = 0;
  uint64_t max_msg_sz = 0;
  ibv_mtu path_mtu = IBV_MTU_1024;  // the smaller of the two ends'
  std::vector<QpRemote> pairs;      // by this node's local rank
};

// Reads `peer`'s address as it reached `node`. Throws PeerError naming the field that does
// not fit (protocol version, GID size, segment length, a missing queue pair).
VerbsPeerAddress read_verbs_address(const wire::VerbsInfo& remote, int peer, int node,
                                    int ranks_per_node, uint64_t segment_size, ibv_mtu local_mtu);

}  // namespace symmesh
