#include "ops/fused/mode_run.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/trace.h"
#include "ops/pe_stats.h"

namespace symmesh {

ModeRun::ModeRun(const char* mode_name, std::unique_ptr<FusedOperator> mode,
                 const FusedOptions& options, const Pe& pe, FusedTensors inputs)
    : name(mode_name), op(std::move(mode)), tensors(std::move(inputs)) {
  shape_tensors(options, pe, tensors);
  op->run(tensors);
  first = tensors.c;
}

void ModeRun::measure(Pe& pe) {
  // Outputs poisoned before every run but the first: a run that leaves any of them unwritten
  // fails the bitwise comparison below instead of passing on the last run's values.
  std::fill(tensors.c.begin(), tensors.c.end(), std::numeric_limits<float>::quiet_NaN());
  std::fill(tensors.gather_out.begin(), tensors.gather_out.end(), std::byte{0xff});
  const RunFigures f = [&] {
    const trace::Scope span(name, "iteration");
    return op->run(tensors);
  }();
  total.push_back(max_over_pes(pe, f.total_s));
  compute.push_back(max_over_pes(pe, f.compute_s));
  comm.push_back(max_over_pes(pe, f.comm_s));
  comm_cpu.push_back(max_over_pes(pe, f.comm_cpu_s));
  wire_bytes = uint64_t(max_over_pes(pe, double(f.wire_bytes)));
  flops = f.flops;
  // Bitwise: the same floats with the same bits (an empty band is trivially equal).
  deterministic = deterministic &&
                  (first.empty() ||
                   std::memcmp(first.data(), tensors.c.data(), first.size() * sizeof(float)) == 0);
}

}  // namespace symmesh
