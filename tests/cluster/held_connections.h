// Raw loopback TCP connections a test holds open against a daemon's port, each from a source
// address of its choice (127.0.0.0/8), to load a server the way a flood of idle or trickling
// clients would: nothing is ever read from them, and whether the server ended one is asked
// without blocking.
#pragma once

#include <string>
#include <vector>

#include "transport/channel.h"

namespace symmesh::testing {

class HeldConnections {
 public:
  HeldConnections() = default;
  HeldConnections(const HeldConnections&) = delete;
  HeldConnections& operator=(const HeldConnections&) = delete;
  ~HeldConnections();

  // Opens `count` connections to `to`, each bound to `source` first. Throws naming the one
  // that failed.
  void open(const HostPort& to, const std::string& source, int count);
  // Writes `bytes` to each connection still open; a connection the server ended is left.
  void send(const std::string& bytes);
  // How many the server has ended (EOF or reset), asked now.
  int ended() const;
  // Opens a fresh connection, from `source`, for each the server ended: a flood that keeps
  // coming back. How many it renewed.
  int renew(const HostPort& to, const std::string& source);
  int size() const { return int(fds_.size()); }

 private:
  std::vector<int> fds_;
};

// Raises this process's open-file limit so it can hold `needed` descriptors; false when the
// host's hard limit is below that.
bool can_hold(int needed);

}  // namespace symmesh::testing
