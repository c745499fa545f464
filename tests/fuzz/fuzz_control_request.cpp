// libFuzzer: the control port's request decoder and the checks every job passes before it is
// queued (fields, files confined to the data directory, host memory), as an authenticated
// client can send them.
#include <cstddef>
#include <cstdint>

#include "common/errors.h"
#include "daemon/jobs/data_paths.h"
#include "daemon/jobs/host_memory.h"
#include "daemon/jobs/job.h"
#include "transport/frame.h"
#include "wire/jobs.pb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace symmesh;
  if (size > (64u << 10)) return 0;  // the session's cap after the handshake
  wire::ClientRequest request;
  try {
    parse_frame_body(request, std::string_view(reinterpret_cast<const char*>(data), size),
                     "fuzzer");
  } catch (const Error&) {
    return 0;
  }
  if (!request.has_submit()) return 0;
  for (const auto& [nodes, ranks] : {std::pair{1, 1}, std::pair{2, 2}, std::pair{3, 2}}) {
    try {
      const wire::JobSpec spec = confine_job_paths(request.submit(), "/nonexistent-data-dir");
      check_job_spec(spec, ClusterShape{nodes, ranks});
      check_job_memory(spec, nodes, ranks, uint64_t{1} << 30);
      wire::enum_text(job_kind_of(spec).wire_kind(spec));
    } catch (const Error&) {
    }
  }
  return 0;
}
