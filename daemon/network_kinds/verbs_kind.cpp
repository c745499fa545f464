// verbs as a network kind: an RDMA device (or none), a VerbsInfo in the hello (the device's
// GID, the registered heap, a queue pair per peer and local rank), and queue pairs connected
// to the peers that chose it.
#include "common/errors.h"
#include "daemon/network_kinds/network_kind.h"
#include "transport/rdma.h"

namespace symmesh {
namespace {

class VerbsKind final : public NetworkKind {
 public:
  std::string_view name() const override { return "verbs"; }

  std::unique_ptr<NetworkTransport> open(const NetworkSetup& setup) const override {
    const DaemonConfig& config = setup.config;
    VerbsOptions options;
    options.device = VerbsDeviceOptions{config.rdma_device, config.rdma_gid_index};
    options.op_timeout = config.wait_timeout;
    options.progress_thread = config.verbs_progress == wire::VERBS_PROGRESS_THREAD;
    return open_verbs_transport(config.node_rank, config.nodes, config.ranks_per_node,
                                setup.node.segment(), setup.node.doorbell(), options);
  }

  std::string address(const NetworkTransport& mine) const override {
    return dynamic_cast<const RdmaTransport&>(mine).local_info().SerializeAsString();
  }

  std::string address_text(const std::string& address) const override {
    wire::VerbsInfo info;
    if (!info.ParseFromString(address)) return "(does not parse)";
    return info.device() + " port " + std::to_string(info.port());
  }

  std::string describe(const NetworkTransport& mine) const override {
    return dynamic_cast<const RdmaTransport&>(mine).describe();
  }

  void connect(NetworkTransport& mine, const std::vector<std::string>& addresses,
               const std::vector<bool>& chosen, Deadline deadline) const override {
    (void)deadline;  // queue pairs connect without waiting for the peer
    auto& verbs = dynamic_cast<RdmaTransport&>(mine);
    for (size_t node = 0; node < addresses.size(); ++node) {
      if (!chosen[node]) continue;
      wire::VerbsInfo info;
      if (!info.ParseFromString(addresses[node])) {
        throw PeerError("node " + std::to_string(node) + "'s verbs address does not parse");
      }
      verbs.connect(int(node), info);
    }
  }
};

}  // namespace

const NetworkKind& verbs_kind() {
  static const VerbsKind kind;
  return kind;
}

}  // namespace symmesh
