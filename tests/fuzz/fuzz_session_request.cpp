// libFuzzer: the request ring as an attached process can write it. A real one-node Node with
// two PEs serves a session job; two attached processes (threads) write the input's requests
// into their rings byte for byte, with the input's tail as the contents of their staging areas
// and heaps (token values, expert ids, gate weights). The daemon must refuse what is wrong,
// naming it, without a crash, a sanitizer report or a hang, and serve the next session.
//
// Input: byte 0 says how many requests each process makes (1 to kMostRequests, its low bits)
// and whether the two make the same calls, as honest PEs do, or each its own (its high bit:
// one PE's calls disagree with the other's, or leave it waiting in a collective until the
// node's wait timeout); then each request's bytes as attach::Request lays them out (zeros past
// the end), the first process's, then the second's when they differ; then the fill pattern. A
// request whose honest cost is past the fuzzer's budget (a staging area past kMostStaging, a
// GEMM past kMostFlops) is left out: its limits are checked before any work, and the unit
// tests cover them.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "api/request_ring.h"
#include "api/session.h"
#include "common/errors.h"
#include "daemon/attach/attach_server.h"
#include "daemon/jobs/job.h"

namespace symmesh {

// The session's friend: writes a request as a hostile process could.
struct SessionProbe {
  static void call(Session& session, const attach::Request& request) { session.call(request); }
  // The staging area, at least `bytes` long, filled with `pattern`.
  static void stage(Session& session, uint64_t bytes, std::span<const uint8_t> pattern) {
    const std::lock_guard staging_held(session.staging_mutex_);
    attach::Request placed{};
    fill(session.stage(placed, bytes, 0), bytes, pattern);
  }
  // The whole heap the process may name, filled with `pattern`.
  static void fill_heap(Session& session, std::span<const uint8_t> pattern) {
    fill(session.slice_ + session.heap_start_, session.slice_bytes_ - session.heap_start_, pattern);
  }

 private:
  static void fill(std::byte* at, uint64_t bytes, std::span<const uint8_t> pattern) {
    if (bytes == 0) return;
    if (pattern.empty()) {
      std::memset(at, 0, bytes);
      return;
    }
    for (uint64_t done = 0; done < bytes; done += pattern.size()) {
      std::memcpy(at + done, pattern.data(), std::min<uint64_t>(pattern.size(), bytes - done));
    }
  }
};

namespace {

constexpr size_t kMostRequests = 6;
constexpr uint64_t kMostStaging = uint64_t{4} << 20;
constexpr double kMostFlops = 1 << 27;
// The session job's wait for a process to attach (they attach before it starts; one that
// sends nothing and detaches at once leaves its PE waiting this long).
constexpr auto kAttachWait = std::chrono::seconds(1);
constexpr auto kAttaching = std::chrono::seconds(5);  // a process's own attach (milliseconds)

NodeConfig two_pes() {
  NodeConfig config;
  config.ranks_per_node = 2;
  config.heap_size = 2 * (size_t{16} << 20);
  config.wait_timeout = std::chrono::seconds(1);  // a PE left waiting by the other
  return config;
}

std::string temporary_directory() {
  std::string pattern = "/tmp/symmesh-fuzz.XXXXXX";
  if (!mkdtemp(pattern.data())) std::abort();
  return pattern;
}

// Made once: a node per input would cost its segment and socket every run.
struct Harness {
  std::string directory = temporary_directory();
  Node node{two_pes()};
  AttachServer server{node, directory, {}, [](const std::string&) {}};
  ~Harness() {
    server.stop();
    std::filesystem::remove_all(directory);
  }
};

Harness& harness() {
  static Harness h;
  return h;
}

// Within the fuzzer's budget (see the header): what each request may make the daemon hold or
// copy, whatever the staging area has grown to, in bytes and flops (the counts are a hostile
// process's, so as doubles, which do not wrap).
bool affordable(const attach::Request& r) {
  const double count = double(r.count), a0 = double(r.args[0]), a1 = double(r.args[1]),
               a2 = double(r.args[2]), a3 = double(r.args[3]), most = double(kMostStaging);
  switch (r.op) {
    case attach::Op::kStage:
      return count <= most;
    case attach::Op::kDispatch:  // tokens x hidden, and tokens x topk ids and weights
      return count * a0 * 4 <= most / 4 && count * a1 * 8 <= most / 4;
    case attach::Op::kLowLatencyDispatch:  // a row per (token, local expert), both halves
      return 2 * a3 * a0 * 4 * std::min(a1, a2 / 2) <= most && count * a1 * 8 <= most / 4;
    case attach::Op::kCombine:  // received rows of their width
      return count * a2 * 4 <= most;
    case attach::Op::kGemmAllReduce:
    case attach::Op::kMatmulReduceScatter:
    case attach::Op::kAllGatherMatmul: {  // m is rows x PEs for the all-gather
      const double m = a0 * 2;
      return m * a1 * a2 <= kMostFlops && m * a1 * 4 <= most;
    }
    default:  // the rest is bounded by the heap, or by the dispatch a combine names
      return true;
  }
}

// One process: its calls until one is refused, then it detaches.
void run_process(std::unique_ptr<Session> session, std::span<const attach::Request> requests,
                 std::span<const uint8_t> pattern) {
  try {
    SessionProbe::fill_heap(*session, pattern);
    for (const attach::Request& request : requests) {
      if (request.op == attach::Op::kStage) {
        SessionProbe::stage(*session, request.count, pattern);
      } else {
        SessionProbe::call(*session, request);
      }
    }
  } catch (const Error&) {
    // Refused, or the session ended: what the daemon must do with a bad request.
  }
}

}  // namespace
}  // namespace symmesh

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace symmesh;
  if (size == 0) return 0;
  const size_t count = 1 + (data[0] & 0x7f) % kMostRequests;
  const bool each_its_own = (data[0] & 0x80) != 0;
  std::vector<attach::Request> requests(each_its_own ? 2 * count : count);
  const size_t request_bytes = std::min(size - 1, requests.size() * sizeof(attach::Request));
  std::memcpy(requests.data(), data + 1, request_bytes);
  for (const attach::Request& request : requests) {
    if (!affordable(request)) return 0;
  }
  const std::span<const uint8_t> pattern(data + 1 + request_bytes, size - 1 - request_bytes);
  const auto calls_of = [&](int local) {
    return std::span<const attach::Request>(requests).subspan(each_its_own ? local * count : 0,
                                                              count);
  };

  Harness& h = harness();
  // Every process attaches before the session starts: a session whose PE ended before its
  // process attached (the node aborted by the other PE's refusal) would leave that process
  // waiting for its call timeout, which is not what this target looks for.
  std::vector<std::unique_ptr<Session>> sessions;
  for (int local = 0; local < h.node.ranks_per_node(); ++local) {
    sessions.push_back(Session::attach(h.server.path(), local, kAttaching));
  }
  wire::JobSpec spec;
  spec.mutable_session()->set_attach_timeout_s(uint32_t(kAttachWait.count()));
  std::vector<std::future<void>> pes, processes;
  for (int local = 0; local < h.node.ranks_per_node(); ++local) {
    pes.push_back(std::async(std::launch::async, [&h, spec, local] {
      try {
        Pe pe(h.node, local);
        job_kind_of(spec).run_on_pe(pe, spec);
      } catch (const std::exception&) {
        h.node.doorbell().abort("a PE's session ended");  // as the node agent does
      }
    }));
    processes.push_back(std::async(std::launch::async, run_process, std::move(sessions[local]),
                                   calls_of(local), pattern));
  }
  // A session that does not end is a finding: let libFuzzer's -timeout report it.
  for (auto& future : processes) future.get();
  for (auto& future : pes) future.get();
  h.node.reset_between_jobs();
  return 0;
}
