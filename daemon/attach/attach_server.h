// The attach socket: how a process on this node becomes one of its PEs. A Unix-domain socket,
// mode 0600 in a directory of mode 0700. For each connection, before reading a byte, the
// server asks the kernel who connected (SO_PEERCRED) and refuses any uid but the daemon's own
// and those of --attach-uid. Then it reads one AttachRequest (bounded in size and time),
// takes the PE's slot, maps a fresh request ring for it, answers, and passes the heap segment
// and the ring with SCM_RIGHTS. One connection is served at a time, each within
// kAttachHandshakeTimeout, so a stalled process delays the next attach by at most that.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/attach/attached_pes.h"
#include "runtime/node.h"

namespace symmesh {

inline constexpr auto kAttachHandshakeTimeout = std::chrono::seconds(5);

class AttachServer {
 public:
  // Listens at `directory`/attach.sock (the directory is created, or tightened, to 0700).
  // `refused(kind)` counts a refusal ("auth": a uid not allowed; "bad_request": the rest).
  AttachServer(Node& node, const std::string& directory, std::vector<unsigned> allowed_uids,
               std::function<void(const std::string&)> refused);
  ~AttachServer();

  const std::string& path() const { return path_; }
  void stop();

 private:
  void accept_loop();
  void serve(std::unique_ptr<BlockingChannel> connection);

  Node& node_;
  std::string path_;
  std::vector<unsigned> allowed_uids_;
  std::function<void(const std::string&)> refused_;
  std::unique_ptr<Listener> listener_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace symmesh
