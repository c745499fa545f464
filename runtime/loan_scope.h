// One PE's part in a call whose PEs lend each other memory (runtime/local_loans.h).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "runtime/local_loans.h"
#include "runtime/pe.h"

namespace symmesh {

// Lends `memory` at construction (before the call's opening barrier); borrow_all() after that
// barrier; done_using() once this PE is done with its peers' memory; complete() once the call
// succeeded. Destroyed, it ends the loan, which waits until every borrower gave it back:
// normally at once, as they did before the closing barrier. A call that did not complete, or
// whose loan still has borrowers after its closing barrier (a barrier passed early), first
// aborts the node's waits, so its peers stop soon. Every wait a borrower makes ends within the
// node's wait timeout, or at once on an abort (a put it is in, within the transport's timeout);
// a borrower still holding the loan well past that would use freed memory, so the daemon stops
// rather than go on.
class LoanScope {
 public:
  // With `discard`, the PE has no room for what it lent for: borrowers write nothing there.
  LoanScope(Pe& pe, std::span<std::byte> memory, bool discard = false);
  ~LoanScope();
  LoanScope(const LoanScope&) = delete;
  LoanScope& operator=(const LoanScope&) = delete;

  // What every PE of the node lent, by local rank; PeerError if one has no loan open.
  const std::vector<LocalLoans::Borrowed>& borrow_all();
  void done_using();  // gives back what borrow_all() took; later calls do nothing
  void complete() { complete_ = true; }

 private:
  Pe& pe_;
  uint64_t number_;  // of this PE's loan, and of the loans it borrows
  std::vector<LocalLoans::Borrowed> borrowed_;
  bool complete_ = false;
};

}  // namespace symmesh
