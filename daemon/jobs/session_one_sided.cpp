#include "daemon/jobs/session_one_sided.h"

#include <cstring>
#include <string>

#include "common/errors.h"

namespace symmesh {
namespace {

int target_pe(const Pe& pe, uint64_t requested, const char* call) {
  if (requested >= uint64_t(pe.n_pes())) {
    throw InvalidArgument(std::string(call) + ": PE " + std::to_string(requested) +
                          " is outside 0.." + std::to_string(pe.n_pes() - 1));
  }
  return int(requested);
}

// The signal word at heap offset `offset` (the same on every PE: the heap is symmetric).
uint64_t* signal_word(Pe& pe, uint64_t offset, const char* call) {
  if (offset % sizeof(uint64_t) != 0) {
    throw InvalidArgument(std::string(call) + ": the signal word's heap offset " +
                          std::to_string(offset) + " is not 8-byte aligned");
  }
  return reinterpret_cast<uint64_t*>(pe.heap_range(offset, sizeof(uint64_t)));
}

}  // namespace

void run_session_one_sided(Pe& pe, const attach::Request& r) {
  const bool get = r.op == attach::Op::kGet;
  const char* call = get ? "get" : "put_signal";
  const int target = target_pe(pe, r.args[0], call);
  std::byte* src = pe.heap_range(r.src, r.count);
  std::byte* dst = pe.heap_range(r.dst, r.count);
  uint64_t* signal = (get && r.args[1] == 0) ? nullptr : signal_word(pe, r.args[1], call);
  if (target == pe.my_pe() && r.count && src < dst + r.count && dst < src + r.count) {
    throw InvalidArgument(std::string(call) + " to this PE itself: the source [" +
                          std::to_string(r.src) + ", +" + std::to_string(r.count) +
                          ") overlaps the destination at " + std::to_string(r.dst));
  }
  if (get) {
    if (r.count) pe.get(dst, src, r.count, target);
    if (signal) pe.signal_set(signal, r.args[2], target);
    return;
  }
  pe.put_signal(dst, src, r.count, signal, r.args[2], SignalOp::kSet, target);
}

}  // namespace symmesh
