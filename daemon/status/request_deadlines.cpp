#include "daemon/status/request_deadlines.h"

#include <sys/socket.h>

namespace symmesh {

void RequestDeadlines::waiting(const void* connection, int fd) {
  Pending& pending = pending_[connection];
  if (fd >= 0) pending.fd = fd;
  pending.deadline = deadline_after(limit_);
  pending.armed = true;
}

void RequestDeadlines::headers_in(const void* connection) {
  const auto it = pending_.find(connection);
  if (it != pending_.end()) it->second.armed = false;
}

void RequestDeadlines::closed(const void* connection) {
  pending_.erase(connection);
}

int RequestDeadlines::shut_overdue() {
  const auto now = Clock::now();
  int shut = 0;
  for (auto& [connection, pending] : pending_) {
    if (!pending.armed || pending.shut || now < pending.deadline || pending.fd < 0) continue;
    ::shutdown(pending.fd, SHUT_RDWR);
    pending.shut = true;
    ++shut;
  }
  return shut;
}

}  // namespace symmesh
