// Private memory the PEs of one node lend each other for one collective call. A node's PEs are
// threads of one daemon, so a PE can write straight into a peer's own arrays (the rows a
// dispatch delivers) or read a peer's (the partials a combine forwards) instead of going through
// the symmetric heap with a copy at each end. The addresses stay in this process: they never go
// through the symmetric heap, which attached processes map and could rewrite.
//
// A call: each PE lends its memory (maybe none) before a barrier; after the barrier each borrows
// what its peers lent, uses it (only inside it) and gives it back. A lender ends its loan before
// its memory may go: from then on nobody can borrow it, and the end waits until every borrower
// gave it back. Loans are numbered per PE, and the PEs of a node lend in the same calls in the
// same order, so a borrower asks for the loan of its own call's number. This rests on the
// process's own bookkeeping alone, not on the barriers: a barrier whose words in the shared heap
// were rewritten cannot make a PE use a peer's memory after the peer let it go, nor memory the
// peer lent for another call.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <span>

#include "transport/wait.h"

namespace symmesh {

class LocalLoans {
 public:
  explicit LocalLoans(int ranks_per_node);

  struct Borrowed {
    std::span<std::byte> memory;
    bool discard = false;  // the lender has no room for what it lent for: write nothing there
  };

  // `local_rank`'s memory for the call (its previous loan must have ended); returns the loan's
  // number: 1 for its first since the last reset, and so on.
  uint64_t lend(int local_rank, std::span<std::byte> memory, bool discard = false);
  // What `local_rank` lent as its loan `number`, in use until give_back(); PeerError when that
  // loan is not open (its call has not come to it yet, or has ended).
  Borrowed borrow(int local_rank, uint64_t number);
  void give_back(int local_rank, Doorbell& bell);
  // Ends `local_rank`'s loan: nobody borrows it any more; waits, through an abort, until every
  // borrower gave it back. False when `deadline` passed first.
  bool end(int local_rank, Doorbell& bell, Deadline deadline);
  int borrowers(int local_rank) const;
  // Between jobs, with no loan open: numbering starts again (a job that failed may have left
  // the PEs with different counts of loans).
  void reset();

 private:
  struct Loan {
    mutable std::mutex mutex;
    std::span<std::byte> memory;
    bool discard = false;
    bool open = false;
    int borrowers = 0;
    uint64_t number = 0;  // of the current or last loan
  };
  Loan& loan(int local_rank) const;
  int ranks_;
  std::unique_ptr<Loan[]> loans_;
};

}  // namespace symmesh
