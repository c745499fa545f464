#include "daemon/jobs/host_memory.h"

#include <unistd.h>

#include <algorithm>

#include "common/errors.h"
#include "common/units.h"

namespace symmesh {
namespace {

uint64_t element_bytes(const std::string& dtype) {
  return dtype == "f32" ? 4 : 2;
}

// One PE of a fused matmul job: per mode its A, B, C and the warm-up's C kept for the
// determinism check (and the gathered A); inputs generated in f32 first; with --verify the
// reference's f32 copies of A and B, one product band and its C.
uint64_t matmul_pe_bytes(const wire::MatmulJob& job, int n_pes) {
  const uint64_t m = job.m(), n = job.n(), k = job.k();
  const uint64_t e = element_bytes(job.dtype().empty() ? "bf16" : job.dtype());
  const bool gathered = job.op() == "allgather-matmul";
  const uint64_t a_rows = gathered ? (m + n_pes - 1) / n_pes : m;
  const uint64_t c_rows = job.op() == "matmul-reduce-scatter" ? (m + n_pes - 1) / n_pes : m;
  const uint64_t a = a_rows * k * e, b = k * n * e, c = c_rows * n * 4;
  const uint64_t per_mode = a + b + 2 * c + (gathered ? m * k * e : 0);
  const uint64_t modes = job.mode() == "both" || job.mode().empty() ? 2 : 1;
  const uint64_t generate = std::max(a_rows * k, k * n) * 4;
  const uint64_t verify =
      job.verify() ? k * n * 4 + a_rows * k * 4 + 2 * c_rows * n * 4 + (gathered ? m * k * e : 0)
                   : 0;
  return modes * per_mode + generate + verify;
}

// One PE of a MoE job: its tokens, biases and two copies of the result; the tokens it
// receives (about topk per token, at most one per PE) and their expert outputs; with
// --verify the reference (for dispatch, every PE's tokens).
uint64_t moe_pe_bytes(const wire::MoeJob& job, int n_pes) {
  const uint64_t t = job.tokens(), h = job.hidden();
  const uint64_t partial = job.partial_dtype() == "f32" ? 4 : 2;
  const uint64_t copies = std::min<uint64_t>(job.topk(), uint64_t(n_pes));
  uint64_t bytes = t * h * 2 * (3 + job.biases()) + t * copies * h * (2 + partial);
  if (job.verify()) {
    bytes += job.op() == "dispatch" ? uint64_t(n_pes) * t * h * 2 + t * copies * h * 2 : t * h * 8;
  }
  return bytes;
}

// One PE of a verified collective: the expected output and its input, in f32.
uint64_t collective_pe_bytes(const wire::CollectiveJob& job, int n_pes) {
  if (!job.verify()) return 0;
  const uint64_t elements = job.bytes() / element_bytes(job.dtype().empty() ? "f32" : job.dtype());
  return elements * 4 * (uint64_t(n_pes) + 1);
}

}  // namespace

uint64_t default_job_memory() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) / 2 : uint64_t{4} << 30;
}

uint64_t job_host_bytes(const wire::JobSpec& spec, int nodes, int ranks_per_node) {
  const int n_pes = nodes * ranks_per_node;
  uint64_t per_pe = 0;
  if (spec.has_matmul()) per_pe = matmul_pe_bytes(spec.matmul(), n_pes);
  if (spec.has_moe()) per_pe = moe_pe_bytes(spec.moe(), n_pes);
  if (spec.has_collective()) per_pe = collective_pe_bytes(spec.collective(), n_pes);
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
