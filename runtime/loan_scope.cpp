#include "runtime/loan_scope.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

namespace symmesh {

LoanScope::LoanScope(Pe& pe, std::span<std::byte> memory) : pe_(pe) {
  pe_.node().loans().lend(pe_.local_rank(), memory);
}

void LoanScope::done_writing() {
  if (!writing_) return;
  writing_ = false;
  pe_.node().loans().done_writing(pe_.node().doorbell());
}

LoanScope::~LoanScope() {
  done_writing();
  if (complete_) return;
  // Twice the wait timeout: a writer's wait, then a put it had started (bounded the same way).
  const auto grace = 2 * pe_.node().wait_timeout() + std::chrono::seconds(10);
  if (pe_.node().loans().wait_until_no_writer(pe_.node().doorbell(), deadline_after(grace))) return;
  spdlog::critical(
      "PE {}: a PE of this node still writes into memory this PE lent it {} ms after the call "
      "failed; stopping rather than let it write into freed memory",
      pe_.my_pe(), std::chrono::duration_cast<std::chrono::milliseconds>(grace).count());
  std::abort();
}

}  // namespace symmesh
