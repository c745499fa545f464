#include "runtime/local_loans.h"

#include "common/errors.h"

namespace symmesh {

LocalLoans::LocalLoans(int ranks_per_node)
    : ranks_(ranks_per_node), loans_(std::make_unique<Loan[]>(size_t(ranks_per_node))) {}

void LocalLoans::lend(int local_rank, std::span<std::byte> memory) {
  if (local_rank < 0 || local_rank >= ranks_) {
    throw InvalidArgument("local rank " + std::to_string(local_rank) +
                          " lends memory; allowed 0.." + std::to_string(ranks_ - 1));
  }
  Loan& loan = loans_[size_t(local_rank)];
  loan.data.store(memory.data(), std::memory_order_release);
  loan.bytes.store(memory.size(), std::memory_order_release);
  writers_.fetch_add(1, std::memory_order_acq_rel);
}

std::span<std::byte> LocalLoans::lent(int local_rank) const {
  const Loan& loan = loans_[size_t(local_rank)];
  return {loan.data.load(std::memory_order_acquire), loan.bytes.load(std::memory_order_acquire)};
}

void LocalLoans::done_writing(Doorbell& bell) {
  writers_.fetch_sub(1, std::memory_order_acq_rel);
  bell.ring();
}

bool LocalLoans::wait_until_no_writer(Doorbell& bell, Deadline deadline) const {
  WaitPolicy policy;
  policy.abortable = false;  // the failure that ended the call has usually aborted the node
  try {
    wait_until(
        bell, deadline, [&] { return writers() == 0; }, [] { return std::string("node writers"); },
        policy);
    return true;
  } catch (const TimeoutError&) {
    return false;
  }
}

}  // namespace symmesh
