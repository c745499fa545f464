// The status endpoint's per-connection deadline for a request's headers: from a connection's
// start (or the end of its previous response) its next request's headers must have arrived
// within `limit`, however slowly the bytes trickle in, or the connection is shut. An idle
// timeout alone lets a client that sends one byte a second hold a connection for ever.
// Used from the one thread that runs the HTTP server's event loop: no locking.
#pragma once

#include <chrono>
#include <unordered_map>

#include "transport/wait.h"

namespace symmesh {

class RequestDeadlines {
 public:
  explicit RequestDeadlines(std::chrono::milliseconds limit) : limit_(limit) {}

  // A connection (the key is the server's handle) on socket `fd` now waits for a request.
  void waiting(const void* connection, int fd);
  // Its request's headers are in: no deadline until its response is done.
  void headers_in(const void* connection);
  void closed(const void* connection);

  // Shuts (shutdown(2), both ways) the sockets past their deadline, once each: the server then
  // sees the end of the stream and closes them itself. How many it shut.
  int shut_overdue();

  size_t size() const { return pending_.size(); }

 private:
  struct Pending {
    int fd = -1;
    Deadline deadline;
    bool armed = true;  // waiting for headers
    bool shut = false;
  };

  std::chrono::milliseconds limit_;
  std::unordered_map<const void*, Pending> pending_;
};

}  // namespace symmesh
