// The parts of a PE's staging area lent out by the process: a call's output that the daemon
// wrote there, handed to the caller where it lies instead of copied out (Python's tensors over
// it), until the caller drops it. Every staged call places its blocks (api/request_ring.h:
// stage_at, stage_room, spill_at) in the first gap between the loans that holds its inputs and
// the outputs it expects; outputs larger than expected go past every loan. The area's mapping
// never moves (api/staging_area.h), so a loan's bytes stay where they are as it grows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "api/request_ring.h"
#include "api/staging_area.h"

namespace symmesh {

class StagingLoans;

// Part of this PE's staging area holding a call's output, lent to the caller: nothing was copied
// out. No later call writes over it until it is destroyed (from any thread), and it stays mapped
// after the session ends.
class StagingLoan {
 public:
  ~StagingLoan();
  StagingLoan(const StagingLoan&) = delete;
  StagingLoan& operator=(const StagingLoan&) = delete;

  std::byte* data() const { return data_; }
  uint64_t bytes() const { return bytes_; }

 private:
  friend class StagingLoans;
  StagingLoan(std::shared_ptr<StagingLoans> loans, uint64_t offset, std::byte* data, uint64_t bytes)
      : loans_(std::move(loans)), offset_(offset), data_(data), bytes_(bytes) {}
  std::shared_ptr<StagingLoans> loans_;
  uint64_t offset_;
  std::byte* data_;
  uint64_t bytes_;
};

class StagingLoans : public std::enable_shared_from_this<StagingLoans> {
 public:
  explicit StagingLoans(std::shared_ptr<attach::StagingArea> area) : area_(std::move(area)) {}

  // Places a call's blocks in `request`: `in_bytes` of inputs and `out_bytes` of outputs
  // expected, in the first gap between loans that holds both.
  void place(attach::Request& request, uint64_t in_bytes, uint64_t out_bytes) const;
  // Lends [offset, offset + bytes) of the area; none for 0 bytes.
  std::shared_ptr<StagingLoan> lend(uint64_t offset, uint64_t bytes);
  size_t outstanding() const;

 private:
  friend class StagingLoan;
  void give_back(uint64_t offset);

  const std::shared_ptr<attach::StagingArea> area_;
  mutable std::mutex mutex_;
  std::map<uint64_t, uint64_t> lent_;  // offset -> end
};

}  // namespace symmesh
