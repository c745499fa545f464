#include "daemon/jobs/session_one_sided.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "common/errors.h"

namespace symmesh {
namespace {

// Gets move at most this much at a time: a tcp get holds its reply whole before it lands.
constexpr uint64_t kGetPiece = uint64_t{16} << 20;

int target_pe(const Pe& pe, uint64_t requested, const std::string& call) {
  if (requested >= uint64_t(pe.n_pes())) {
    throw InvalidArgument(call + ": PE " + std::to_string(requested) + " is outside 0.." +
                          std::to_string(pe.n_pes() - 1));
  }
  return int(requested);
}

// [offset, offset + bytes) on the heap, inside one allocation of the process; `what` names it.
std::byte* allocated(Pe& pe, const Allocations& allocations, uint64_t offset, uint64_t bytes,
                     const std::string& what) {
  const auto after = allocations.upper_bound(offset);
  bool inside = false;
  if (after != allocations.begin()) {
    const auto& [start, size] = *std::prev(after);
    const uint64_t into = offset - start;  // start <= offset: the allocation at or before it
    inside = into <= size && bytes <= size - into;
  }
  if (!inside) {
    throw InvalidArgument(what + ": bytes [" + std::to_string(offset) + ", +" +
                          std::to_string(bytes) +
                          ") are not inside an allocation this process's malloc answered "
                          "(allowed: its own heap tensors)");
  }
  return pe.heap_range(offset, bytes);
}

}  // namespace

void run_session_one_sided(Pe& pe, const attach::Request& r, const Allocations& allocations) {
  const bool get = r.op == attach::Op::kGet;
  const std::string call = get ? "get" : "put_signal";
  const int target = target_pe(pe, r.args[0], call);
  const std::string there = " (on PE " + std::to_string(target) + ")";
  std::byte* src = allocated(pe, allocations, r.src, r.count,
                             call + "'s source" + (get ? there : std::string()));
  std::byte* dst = allocated(pe, allocations, r.dst, r.count,
                             call + "'s destination" + (get ? std::string() : there));
  uint64_t* signal = nullptr;
  if (!get || r.args[1] != 0) {
    if (r.args[1] % sizeof(uint64_t) != 0) {
      throw InvalidArgument(call + ": the signal word's heap offset " + std::to_string(r.args[1]) +
                            " is not 8-byte aligned");
    }
    signal = reinterpret_cast<uint64_t*>(
        allocated(pe, allocations, r.args[1], sizeof(uint64_t), call + "'s signal word" + there));
  }
  if (target == pe.my_pe() && r.count && src < dst + r.count && dst < src + r.count) {
    throw InvalidArgument(call + " to this PE itself: the source [" + std::to_string(r.src) +
                          ", +" + std::to_string(r.count) + ") overlaps the destination at " +
                          std::to_string(r.dst));
  }
  if (get) {
    for (uint64_t at = 0; at < r.count; at += kGetPiece) {
      pe.get(dst + at, src + at, std::min(kGetPiece, r.count - at), target);
    }
    if (signal) pe.signal_set(signal, r.args[2], target);
    return;
  }
  pe.put_signal(dst, src, r.count, signal, r.args[2], SignalOp::kSet, target);
}

}  // namespace symmesh
