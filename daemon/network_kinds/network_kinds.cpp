#include "common/errors.h"
#include "daemon/network_kinds/network_kind.h"

namespace symmesh {

const std::vector<const NetworkKind*>& network_kinds() {
  static const std::vector<const NetworkKind*> kinds{
      &verbs_kind(),
      &tcp_kind(),  // the fallback: last
  };
  return kinds;
}

const wire::TransportAddress* offered(const wire::NodeInfo& info, std::string_view kind) {
  for (const auto& address : info.transport()) {
    if (address.kind() == kind && address.absent().empty()) return &address;
  }
  return nullptr;
}

PeerChoice choose_transport(const std::vector<LocalEnd>& mine, const wire::NodeInfo& peer,
                            std::string_view forced) {
  const std::string node = "node " + std::to_string(peer.node_rank());
  std::string why_not;  // why each kind before the fallback does not carry it
  for (size_t k = 0; k < mine.size(); ++k) {
    const LocalEnd& end = mine[k];
    const std::string name(end.kind->name());
    const bool is_forced = forced == name;
    if (end.kind->fallback()) {
      if (!end.open) break;  // only a single node has no fallback, and no peers
      return {k, name + ": " + (is_forced ? "forced by --transport" : why_not)};
    }
    if (!forced.empty() && !is_forced) continue;
    std::string absent;  // why this kind cannot carry it
    std::string theirs;  // why the peer has none
    if (!end.open) {
      absent = end.absent;
    } else if (!offered(peer, name)) {
      for (const auto& address : peer.transport()) {
        if (address.kind() == name) theirs = address.absent();
      }
      if (theirs.empty()) theirs = "its hello does not offer it";
      absent = node + " has none (" + theirs + ")";
    } else {
      return {k, name + ": " + end.described +
                     (is_forced ? ", forced by --transport" : ", both ends have it")};
    }
    if (is_forced) {
      throw PeerError("--transport " + name + ": " + node + " cannot use " + name + " (" +
                      (theirs.empty() ? absent : theirs) +
                      "); every node needs it, or use --transport auto");
    }
    why_not += (why_not.empty() ? "" : "; ") + name + ": " + absent;
  }
  throw PeerError("no network transport reaches " + node);
}

}  // namespace symmesh
