// One PE's part in a call that lends memory to its node peers (runtime/local_loans.h).
#pragma once

#include <cstddef>
#include <span>

#include "runtime/pe.h"

namespace symmesh {

// Lends `memory` at construction; done_writing() once this PE's own writes into its peers'
// memory are done; complete() after the call's closing barrier, by which every writer is done.
// Destroyed without complete() (the call failed), it waits until no PE of the node writes before
// the lent memory may go. Every wait a writer makes ends within the node's wait timeout, or at
// once on an abort; a writer still writing well past that would write into freed memory, so the
// daemon stops, naming it, rather than go on.
class LoanScope {
 public:
  LoanScope(Pe& pe, std::span<std::byte> memory);
  ~LoanScope();
  LoanScope(const LoanScope&) = delete;
  LoanScope& operator=(const LoanScope&) = delete;

  void done_writing();  // once; later calls do nothing
  void complete() { complete_ = true; }

 private:
  Pe& pe_;
  bool writing_ = true;
  bool complete_ = false;
};

}  // namespace symmesh
