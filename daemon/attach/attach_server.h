// The attach socket: how a process on this node becomes one of its PEs. A Unix-domain socket,
// mode 0600 in a directory of mode 0700. For each connection, before reading a byte, the
// server asks the kernel who connected (SO_PEERCRED) and refuses any uid but the daemon's own
// and those of --attach-uid. Then it reads one AttachRequest (bounded in size and time),
// takes the PE's slot, maps a fresh request ring for it, answers, and passes the heap segment
// and the ring with SCM_RIGHTS.
//
// Handshakes run concurrently on one asio thread: a stalled process costs a socket, never the
// next attach. Each has kAttachHandshakeTimeout; at most kMaxPendingAttaches are in progress,
// kMaxPendingAttachesPerUid from one uid and kMaxPendingAttachesPerProcess from one process.
// More are closed at accept and counted as "overload".
#pragma once

#include <asio.hpp>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon/attach/attached_pes.h"
#include "runtime/node.h"
#include "wire/attach.pb.h"

namespace symmesh {

inline constexpr auto kAttachHandshakeTimeout = std::chrono::seconds(5);
inline constexpr size_t kMaxPendingAttaches = 256;
inline constexpr size_t kMaxPendingAttachesPerUid = 192;
inline constexpr size_t kMaxPendingAttachesPerProcess = 16;

class AttachServer {
 public:
  // Listens at `directory`/attach.sock (the directory is created, or tightened, to 0700).
  // `refused(kind)` counts a refusal ("auth": a uid not allowed; "overload": past a cap;
  // "timeout": no request in time; "bad_request": the rest).
  AttachServer(Node& node, const std::string& directory, std::vector<unsigned> allowed_uids,
               std::function<void(const std::string&)> refused);
  ~AttachServer();

  const std::string& path() const { return path_; }
  void stop();

 private:
  class Handshake;  // one connection, from its accept to its answer

  void accept_next();
  void admit(asio::local::stream_protocol::socket socket);
  // Whether `who` may start one more handshake; a Handshake takes and gives its place.
  bool has_place(const PeerCredentials& who) const;
  void take_place(const PeerCredentials& who);
  void give_place(const PeerCredentials& who);
  // The request is in: takes the slot and answers with the segment and a fresh ring.
  void answer(PeerCredentials who, std::unique_ptr<BlockingChannel> connection,
              const wire::AttachRequest& request);
  // Counts the refusal, logs it and tells the process why (when it still listens).
  void refuse_attach(BlockingChannel& channel, const std::string& kind, const std::string& why);
  void reap_every_while();

  Node& node_;
  std::string path_;
  std::vector<unsigned> allowed_uids_;
  std::function<void(const std::string&)> refused_;
  // Touched only on thread_ (the io_context's one thread), and declared before io_: a
  // handshake the io_context drops when destroyed gives its place back.
  size_t pending_ = 0;
  std::map<unsigned, size_t> pending_by_uid_;
  std::map<int, size_t> pending_by_pid_;
  asio::io_context io_;
  asio::local::stream_protocol::acceptor acceptor_;
  asio::steady_timer reap_timer_;
  asio::steady_timer accept_pause_;  // after a failed accept
  std::thread thread_;
};

}  // namespace symmesh
