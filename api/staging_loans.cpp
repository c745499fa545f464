#include "api/staging_loans.h"

#include <algorithm>
#include <string>

#include "api/staging_layout.h"
#include "common/errors.h"

namespace symmesh {

StagingLoan::~StagingLoan() {
  loans_->give_back(offset_);
}

void StagingLoans::place(attach::Request& request, uint64_t in_bytes, uint64_t out_bytes) const {
  const uint64_t inputs = attach::align64(in_bytes);
  const std::lock_guard lock(mutex_);
  uint64_t from = 0;  // the gap's start: past every loan before it
  for (const auto& [offset, end] : lent_) {
    if (offset >= from && offset - from >= inputs && offset - from - inputs >= out_bytes) {
      request.stage_at = from;
      request.stage_room = offset - from;
      // Past every loan (they lie apart, in offset order): outputs larger than expected go there.
      request.spill_at = attach::align64(lent_.rbegin()->second);
      return;
    }
    from = std::max(from, attach::align64(end));
  }
  request.stage_at = from;
  request.stage_room = attach::kMaxStagingBytes - std::min(from, attach::kMaxStagingBytes);
  request.spill_at = from + inputs;  // never taken: the room reaches the area's end
}

std::shared_ptr<StagingLoan> StagingLoans::lend(uint64_t offset, uint64_t bytes) {
  if (bytes == 0) return nullptr;
  std::byte* data = area_->range(offset, bytes, "a lent output");
  {
    const std::lock_guard lock(mutex_);
    if (!lent_.emplace(offset, offset + bytes).second) {
      throw Error("staging offset " + std::to_string(offset) + " is lent already");
    }
  }
  return std::shared_ptr<StagingLoan>(new StagingLoan(shared_from_this(), offset, data, bytes));
}

size_t StagingLoans::outstanding() const {
  const std::lock_guard lock(mutex_);
  return lent_.size();
}

void StagingLoans::give_back(uint64_t offset) {
  const std::lock_guard lock(mutex_);
  lent_.erase(offset);
}

}  // namespace symmesh
