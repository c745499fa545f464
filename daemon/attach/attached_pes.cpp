#include "daemon/attach/attached_pes.h"

#include <signal.h>
#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "common/errors.h"

namespace symmesh {

Attachment::Attachment(int local_rank, PeerCredentials who,
                       std::unique_ptr<BlockingChannel> connection, attach::Ring* ring, int ring_fd)
    : local_rank_(local_rank),
      who_(who),
      connection_(std::move(connection)),
      ring_(ring),
      staging_(ring_fd) {}

Attachment::~Attachment() {
  close("the daemon let the PE go");
  munmap(ring_, attach::kRingBytes);
}

bool Attachment::gone() const {
  if (connection_->peer_state() == BlockingChannel::PeerState::kClosed) return true;
  return ::kill(who_.pid, 0) != 0 && errno == ESRCH;
}

bool Attachment::spoke() const {
  return connection_->peer_state() == BlockingChannel::PeerState::kSpoke;
}

std::string Attachment::describe(int pe) const {
  return "the process of PE " + std::to_string(pe) + " (pid " + std::to_string(who_.pid) + ")";
}

void Attachment::close(const std::string& why) {
  // The daemon's own flag: the ring's lies in memory the process can write.
  if (ended_.exchange(true)) return;
  std::strncpy(ring_->closed_reason, why.c_str(), attach::kMessageBytes - 1);
  ring_->closed.store(1, std::memory_order_release);
  wake_shared(ring_->completed);
}

AttachedPes::AttachedPes(int ranks_per_node) : slots_(ranks_per_node), taken_(ranks_per_node) {}

void AttachedPes::hold(std::shared_ptr<Attachment> attachment) {
  std::lock_guard lock(mutex_);
  const int rank = attachment->local_rank();
  if (rank < 0 || rank >= int(slots_.size())) {
    throw InvalidArgument("local rank " + std::to_string(rank) + " is outside 0.." +
                          std::to_string(slots_.size() - 1));
  }
  const auto& holder = slots_[rank];
  if (holder && !holder->gone() && !(holder->ended() && holder->pid() == attachment->pid())) {
    throw InvalidArgument(
        "local rank " + std::to_string(rank) + " is held by pid " + std::to_string(holder->pid()) +
        (holder->ended() ? " (its session ended; the rank is free once that process exits or "
                           "closes its attach connection)"
                         : " (a PE takes one process)"));
  }
  slots_[rank] = std::move(attachment);
  changed_.notify_all();
}

void AttachedPes::release(const Attachment& attachment) {
  std::lock_guard lock(mutex_);
  auto& slot = slots_.at(attachment.local_rank());
  if (slot.get() == &attachment) slot.reset();
  changed_.notify_all();
}

void AttachedPes::close_all(const std::string& why) {
  std::lock_guard lock(mutex_);
  for (auto& slot : slots_) {
    if (slot) slot->close(why);
  }
}

int AttachedPes::reap() {
  std::lock_guard lock(mutex_);
  int reaped = 0;
  for (auto& slot : slots_) {
    if (slot && slot->gone()) {
      slot.reset();
      ++reaped;
    }
  }
  if (reaped) changed_.notify_all();
  return reaped;
}

std::vector<int> AttachedPes::holders() const {
  std::lock_guard lock(mutex_);
  std::vector<int> pids;
  for (const auto& slot : slots_) pids.push_back(slot ? slot->pid() : 0);
  return pids;
}

std::vector<uint64_t> AttachedPes::taken() const {
  std::lock_guard lock(mutex_);
  return taken_;
}

namespace {
std::unique_ptr<AttachedPes> table;
}

AttachedPes& attached_pes() {
  if (!table) throw PeerError("this daemon takes no attached processes");
  return *table;
}

void configure_attached_pes(int ranks_per_node) {
  table = std::make_unique<AttachedPes>(ranks_per_node);
}

}  // namespace symmesh
