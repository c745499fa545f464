#include "runtime/loan_scope.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace symmesh {

LoanScope::LoanScope(Pe& pe, std::span<std::byte> memory, bool discard)
    : pe_(pe), number_(pe.node().loans().lend(pe.local_rank(), memory, discard)) {}

const std::vector<LocalLoans::Borrowed>& LoanScope::borrow_all() {
  for (int j = int(borrowed_.size()); j < pe_.node().ranks_per_node(); ++j) {
    borrowed_.push_back(pe_.node().loans().borrow(j, number_));
  }
  return borrowed_;
}

void LoanScope::done_using() {
  for (size_t j = 0; j < borrowed_.size(); ++j) {
    pe_.node().loans().give_back(int(j), pe_.node().doorbell());
  }
  borrowed_.clear();
}

LoanScope::~LoanScope() {
  done_using();
  Node& node = pe_.node();
  if (!complete_) {
    node.doorbell().abort("PE " + std::to_string(pe_.my_pe()) +
                          " left a call early while its node peers could use its memory");
  } else if (node.loans().borrowers(pe_.local_rank()) != 0) {
    node.doorbell().abort("PE " + std::to_string(pe_.my_pe()) +
                          " passed a call's closing barrier while a node peer still used its "
                          "memory: a barrier was passed early");
  }
  // Twice the wait timeout: a borrower's wait, then a put it had started (the daemon gives its
  // transports the same timeout).
  const auto grace = 2 * node.wait_timeout() + std::chrono::seconds(10);
  if (node.loans().end(pe_.local_rank(), node.doorbell(), deadline_after(grace))) return;
  spdlog::critical(
      "PE {}: a PE of this node still uses memory this PE lent it {} ms after the call ended; "
      "stopping rather than let it use freed memory",
      pe_.my_pe(), std::chrono::duration_cast<std::chrono::milliseconds>(grace).count());
  spdlog::default_logger()->flush();
  std::abort();
}

}  // namespace symmesh
