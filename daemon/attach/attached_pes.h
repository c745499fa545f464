// The processes attached to this node's PEs: one slot per local rank, held by at most one
// process. The attach server fills a slot; the session job's thread for that PE waits for it
// and serves its request ring until the session ends. A slot is free only when its process is
// gone (its attach connection closed, or its pid no longer exists): until then the process
// may still map the PE's memory. A closed connection is the kernel's word that the process
// exited or let its attachment go; one that shuts its socket down and lives on keeps the
// descriptors it was passed (attached processes are one trust domain). Only that same process may
// take it again before, once its session ended (a program that attaches, detaches and attaches
// again).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/request_ring.h"
#include "api/staging_area.h"
#include "transport/channel.h"
#include "transport/wait.h"

namespace symmesh {

// One attached process: its connection (open for as long as the process lives), the
// request ring the daemon mapped for it and the staging area after the ring.
class Attachment {
 public:
  // Takes the ring's mapping and its memfd.
  Attachment(int local_rank, PeerCredentials who, std::unique_ptr<BlockingChannel> connection,
             attach::Ring* ring, int ring_fd);
  ~Attachment();
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;

  int local_rank() const { return local_rank_; }
  int pid() const { return who_.pid; }
  attach::Ring& ring() { return *ring_; }
  attach::StagingArea& staging() { return staging_; }
  // The process is gone: its connection closed or failed, or its pid no longer exists.
  bool gone() const;
  // It wrote on its connection after attaching, where nothing is read: a protocol error.
  bool spoke() const;
  // The session that served it ended (it detached, or the session failed): no later session
  // serves it.
  bool ended() const { return ended_.load(); }
  // "the process of PE 3 (pid 1234)"
  std::string describe(int pe) const;
  // Stops serving: the process's waits end with `why`.
  void close(const std::string& why);

 private:
  std::atomic<bool> ended_{false};
  int local_rank_;
  PeerCredentials who_;
  std::unique_ptr<BlockingChannel> connection_;
  attach::Ring* ring_;
  attach::StagingArea staging_;
};

class AttachedPes {
 public:
  explicit AttachedPes(int ranks_per_node);

  // Takes the slot of `attachment`'s local rank; throws InvalidArgument naming the pid that
  // holds it, while that process is there (unless it is the same process, its session ended).
  void hold(std::shared_ptr<Attachment> attachment);
  // The process attached to `local_rank`, once there is one, counted as taken up; nullptr at
  // the deadline or when `stop()` is true (checked every slice).
  template <class Stop>
  std::shared_ptr<Attachment> wait_for(int local_rank, Deadline deadline, Stop&& stop) {
    std::unique_lock lock(mutex_);
    while (!slots_.at(local_rank) || slots_[local_rank]->gone() || slots_[local_rank]->ended()) {
      if (stop() || Clock::now() >= deadline) return nullptr;
      changed_.wait_for(lock, std::chrono::milliseconds(100));
    }
    ++taken_[local_rank];
    return slots_[local_rank];
  }
  // Frees the slot if `attachment` still holds it.
  void release(const Attachment& attachment);
  // Ends every attached process's session with `why` (the daemon is stopping).
  void close_all(const std::string& why);
  // Frees the slots whose process went away; returns how many.
  int reap();
  // "0: pid 1234; 1: free"
  std::vector<int> holders() const;  // pid per local rank, 0 when free
  // Per local rank, how many processes wait_for handed out since the daemon started: a
  // launched process that exits while its count stands was never served (symmesh launch
  // ends the session then rather than let the PE wait out its attach timeout).
  std::vector<uint64_t> taken() const;

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::shared_ptr<Attachment>> slots_;
  std::vector<uint64_t> taken_;
};

// This daemon's table (the session job's PE threads find their processes in it).
AttachedPes& attached_pes();
void configure_attached_pes(int ranks_per_node);

}  // namespace symmesh
