#include "transport/verbs/address.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/errors.h"

namespace symmesh {

wire::VerbsInfo verbs_address(const VerbsDevice& device, const SegmentView& segment, uint32_t rkey,
                              int node, int nodes, int ranks_per_node,
                              const std::function<const VerbsPair&(int local, int peer)>& pair) {
  wire::VerbsInfo info;
  info.set_protocol_version(kVerbsProtocolVersion);
  info.set_device(device.name());
  info.set_gid(std::string(reinterpret_cast<const char*>(device.gid().raw), 16));
  info.set_gid_index(device.gid_index());
  info.set_lid(device.lid());
  info.set_port(device.port());
  info.set_path_mtu(device.active_mtu());
  info.set_mr_addr(reinterpret_cast<uint64_t>(segment.base));
  info.set_rkey(rkey);
  info.set_mr_length(segment.size);
  info.set_max_msg_sz(device.max_msg_sz());
  for (int local = 0; local < ranks_per_node; ++local) {
    for (int peer = 0; peer < nodes; ++peer) {
      if (peer == node) continue;
      auto* qp = info.add_qp();
      qp->set_peer_node(peer);
      qp->set_local_rank(local);
      qp->set_qpn(pair(local, peer).qpn());
      qp->set_psn(pair(local, peer).psn());
    }
  }
  return info;
}

VerbsPeerAddress read_verbs_address(const wire::VerbsInfo& remote, int peer, int node,
                                    int ranks_per_node, uint64_t segment_size, ibv_mtu local_mtu) {
  const std::string who = "verbs: node " + std::to_string(peer);
  if (remote.protocol_version() != kVerbsProtocolVersion) {
    throw PeerError(who + ": protocol_version mismatch: it has " +
                    std::to_string(remote.protocol_version()) + ", this node has " +
                    std::to_string(kVerbsProtocolVersion));
  }
  if (remote.gid().size() != 16) {
    throw PeerError(who + ": gid has " + std::to_string(remote.gid().size()) +
                    " bytes, 16 expected");
  }
  if (remote.mr_length() != segment_size) {
    throw PeerError(who + ": mr_length " + std::to_string(remote.mr_length()) +
                    " differs from this node's segment (" + std::to_string(segment_size) + ")");
  }
  VerbsPeerAddress address;
  address.addr = remote.mr_addr();
  address.rkey = remote.rkey();
  address.length = remote.mr_length();
  address.max_msg_sz = remote.max_msg_sz();
  address.path_mtu = static_cast<ibv_mtu>(std::min<uint32_t>(remote.path_mtu(), local_mtu));
  for (int local = 0; local < ranks_per_node; ++local) {
    const wire::VerbsQp* match = nullptr;
    for (const auto& qp : remote.qp()) {
      if (int(qp.peer_node()) == node && int(qp.local_rank()) == local) match = &qp;
    }
    if (!match) {
      throw PeerError(who + " sent no queue pair for node " + std::to_string(node) +
                      " local rank " + std::to_string(local));
    }
    QpRemote to;
    to.qpn = match->qpn();
    to.psn = match->psn();
    std::memcpy(to.gid.raw, remote.gid().data(), 16);
    to.lid = static_cast<uint16_t>(remote.lid());
    address.pairs.push_back(to);
  }
  return address;
}

}  // namespace symmesh
