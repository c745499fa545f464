// Bootstrap (protobuf over TCP): every node authenticates to the root (node 0) and says
// Hello; the root checks each Hello against its own, refuses a mismatch on both sides with
// the field named, and once every node has come answers all of them with the ClusterView.
// The connection stays open as the node's control link.
#pragma once

#include <memory>
#include <vector>

#include "bootstrap.pb.h"
#include "transport/channel.h"

namespace symmesh {

// Root: accepts the other nodes' Hellos until all have come or the deadline passes (then
// throws naming the nodes that never came). `links[n]` is node n's connection (none for 0).
wire::ClusterView bootstrap_root(Listener& listener, const wire::NodeHello& mine,
                                 const std::string& secret, Deadline deadline,
                                 std::vector<std::unique_ptr<BlockingChannel>>& links);

// Any other node: connects to the root (retrying until it listens), says Hello and waits
// for the ClusterView. Throws with the root's reason when refused.
wire::ClusterView bootstrap_join(const HostPort& root, const wire::NodeHello& mine,
                                 const std::string& secret, Deadline deadline,
                                 std::unique_ptr<BlockingChannel>& link);

// Empty when `theirs` may join a cluster whose root said `root`; otherwise the mismatch.
std::string check_hello(const wire::NodeHello& root, const wire::NodeHello& theirs);

}  // namespace symmesh
