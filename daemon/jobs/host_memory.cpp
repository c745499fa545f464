#include "daemon/jobs/host_memory.h"

#include <unistd.h>

#include <algorithm>

#include "common/errors.h"
#include "common/units.h"
#include "daemon/jobs/job.h"

namespace symmesh {

uint64_t default_job_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 2 : uint64_t{4} << 30;
}

uint64_t job_host_bytes(const wire::JobSpec& spec, int nodes, int ranks_per_node) {
  const uint64_t per_pe = job_kind_of(spec).pe_host_bytes(spec, nodes * ranks_per_node);
  return per_pe * uint64_t(ranks_per_node);
}

void check_job_memory(const wire::JobSpec& spec, int nodes, int ranks_per_node, uint64_t limit) {
  const uint64_t need = job_host_bytes(spec, nodes, ranks_per_node);
  if (need <= limit) return;
  throw InvalidArgument("the job needs about " + format_bytes(need) +
                        " of host memory on each node (inputs, outputs and reference for " +
                        std::to_string(ranks_per_node) + " ranks), above this daemon's " +
                        "--job-memory " + format_bytes(limit) +
                        ": shrink the job, or start the daemons with a larger --job-memory");
}

}  // namespace symmesh
