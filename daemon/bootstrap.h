// Bootstrap (protobuf over TCP): every node authenticates to the root (node 0) and says
// Hello; the root checks each Hello against its own (daemon/join_listener.h), refuses a
// mismatch on both sides with the field named, and once every node has come answers all of
// them with the ClusterView. The connection stays open as the node's control link. The same
// exchange re-forms the cluster after a node or the root restarts.
#pragma once

#include <memory>
#include <vector>

#include "transport/channel.h"
#include "wire/bootstrap.pb.h"

namespace symmesh {

// A hello (after the handshake, so from a node that proved the secret) is at most this.
inline constexpr uint32_t kMaxHelloFrame = 1u << 20;

// The root: the view of a formation from every node's hello (index = node rank).
wire::ClusterView build_view(const std::vector<wire::NodeHello>& hellos, uint64_t epoch);

// Any other node, on a fresh connection to the root: authenticates, says Hello and waits for
// the ClusterView (the root answers once every node has come). Throws with the root's reason
// when refused (InvalidArgument), PeerError or TimeoutError otherwise.
wire::ClusterView bootstrap_join(BlockingChannel& link, const wire::NodeHello& mine,
                                 const std::string& secret, Deadline deadline);

// Empty when `theirs` may join a cluster whose root said `root`; otherwise the mismatch.
std::string check_hello(const wire::NodeHello& root, const wire::NodeHello& theirs);

}  // namespace symmesh
