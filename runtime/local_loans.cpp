#include "runtime/local_loans.h"

#include "common/errors.h"

namespace symmesh {

LocalLoans::LocalLoans(int ranks_per_node)
    : ranks_(ranks_per_node), loans_(std::make_unique<Loan[]>(size_t(ranks_per_node))) {}

LocalLoans::Loan& LocalLoans::loan(int local_rank) const {
  if (local_rank < 0 || local_rank >= ranks_) {
    throw InvalidArgument("local rank " + std::to_string(local_rank) + " has no loan; allowed 0.." +
                          std::to_string(ranks_ - 1));
  }
  return loans_[size_t(local_rank)];
}

uint64_t LocalLoans::lend(int local_rank, std::span<std::byte> memory, bool discard) {
  Loan& l = loan(local_rank);
  const std::lock_guard lock(l.mutex);
  if (l.open || l.borrowers != 0) {
    throw Error("local rank " + std::to_string(local_rank) +
                " lends again before its last loan ended");
  }
  l.memory = memory;
  l.discard = discard;
  l.open = true;
  return ++l.number;
}

LocalLoans::Borrowed LocalLoans::borrow(int local_rank, uint64_t number) {
  Loan& l = loan(local_rank);
  const std::lock_guard lock(l.mutex);
  if (!l.open || l.number != number) {
    throw PeerError("local rank " + std::to_string(local_rank) + " has not lent for this call " +
                    "(its loan " + std::to_string(number) + "; it is at loan " +
                    std::to_string(l.number) + (l.open ? ", open" : ", ended") +
                    "): a barrier before it was passed early");
  }
  ++l.borrowers;
  return {l.memory, l.discard};
}

void LocalLoans::give_back(int local_rank, Doorbell& bell) {
  Loan& l = loan(local_rank);
  {
    const std::lock_guard lock(l.mutex);
    --l.borrowers;
  }
  bell.ring();
}

void LocalLoans::reset() {
  for (int j = 0; j < ranks_; ++j) {
    Loan& l = loans_[size_t(j)];
    const std::lock_guard lock(l.mutex);
    l.number = 0;
  }
}

int LocalLoans::borrowers(int local_rank) const {
  const Loan& l = loan(local_rank);
  const std::lock_guard lock(l.mutex);
  return l.borrowers;
}

bool LocalLoans::end(int local_rank, Doorbell& bell, Deadline deadline) {
  Loan& l = loan(local_rank);
  {
    const std::lock_guard lock(l.mutex);
    l.open = false;
  }
  WaitPolicy policy;
  policy.abortable = false;  // a failed call aborts the node first
  try {
    wait_until(
        bell, deadline, [&] { return borrowers(local_rank) == 0; },
        [] { return std::string("the borrowers of a loan"); }, policy);
  } catch (const TimeoutError&) {
    return false;
  }
  const std::lock_guard lock(l.mutex);
  l.memory = {};
  return true;
}

}  // namespace symmesh
