#include "daemon/jobs/staged_blocks.h"

#include <string>

#include "api/staging_area.h"
#include "api/staging_layout.h"
#include "common/errors.h"

namespace symmesh {
namespace {

void check_offset(const char* field, uint64_t offset) {
  if (offset % 64 == 0 && offset <= attach::kMaxStagingBytes) return;
  throw InvalidArgument(std::string("staging offset ") + field + " = " + std::to_string(offset) +
                        ": allowed a multiple of 64 up to " +
                        std::to_string(attach::kMaxStagingBytes));
}

}  // namespace

StagedBlocks::StagedBlocks(const attach::Request& r, uint64_t in_end) : r_(r), in_end_(in_end) {
  check_offset("stage_at", r.stage_at);
  check_offset("spill_at", r.spill_at);
  // in_end comes from bounded shapes: the sum cannot wrap.
  const uint64_t past_inputs = r.stage_at + attach::align64(in_end);
  if (r.spill_at < past_inputs) {
    throw InvalidArgument("staging offset spill_at = " + std::to_string(r.spill_at) +
                          " is not past the call's inputs, [" + std::to_string(r.stage_at) + ", " +
                          std::to_string(past_inputs) + "): allowed " +
                          std::to_string(past_inputs) + " or more");
  }
}

uint64_t StagedBlocks::outputs(uint64_t out_end) const {
  return attach::staged_outputs_at(r_, in_end_, out_end);
}

}  // namespace symmesh
