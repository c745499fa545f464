// Private memory the PEs of one node lend each other for one collective call. A node's PEs are
// threads of one daemon, so a PE can write straight into a peer's own arrays (the rows a
// dispatch delivers) instead of into the symmetric heap, to be copied out from there. The
// addresses stay in this process: they never go through the symmetric heap, which attached
// processes map and could rewrite.
//
// A call: each PE lends its memory (maybe none), which also counts it as a writer, before a
// barrier; after the barrier it reads what its peers lent and writes only inside it; it stops
// being a writer when its writes are done. A PE whose call ends early (it failed) waits until no
// PE of the node is a writer before its memory may go: a peer's write may still be under way.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <span>

#include "transport/wait.h"

namespace symmesh {

class LocalLoans {
 public:
  explicit LocalLoans(int ranks_per_node);

  // `local_rank`'s memory for the call, seen by its peers after the next barrier; counts the PE
  // as a writer.
  void lend(int local_rank, std::span<std::byte> memory);
  // What `local_rank` lent for the call.
  std::span<std::byte> lent(int local_rank) const;
  // One writer's writes are done; rings `bell` for a PE waiting on them.
  void done_writing(Doorbell& bell);
  // Waits, through an abort, until no PE of the node is a writer; false when `deadline` passed.
  bool wait_until_no_writer(Doorbell& bell, Deadline deadline) const;
  int writers() const { return writers_.load(std::memory_order_acquire); }

 private:
  struct Loan {
    std::atomic<std::byte*> data{nullptr};
    std::atomic<size_t> bytes{0};
  };
  int ranks_;
  std::unique_ptr<Loan[]> loans_;
  alignas(64) std::atomic<int> writers_{0};
};

}  // namespace symmesh
