#include "ops/fused/mode_run.h"

#include <cstring>

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
