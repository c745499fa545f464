#include "transport/shm/shm_transport.h"

#include <cstring>

#include "common/errors.h"
#include "transport/segment_ops.h"

namespace symmesh {

ShmTransport::ShmTransport(SegmentView segment, Doorbell& doorbell, int node)
    : segment_(segment), doorbell_(doorbell), node_(node) {}

void ShmTransport::check(int node, uint64_t offset, uint64_t length, bool word) const {
  if (node != node_) {
    throw InvalidArgument("shm transport of node " + std::to_string(node_) + " cannot reach node " +
                          std::to_string(node));
  }
  const std::string problem = check_range(offset, length, segment_.size, word);
  if (!problem.empty()) throw InvalidArgument("shm: " + problem);
}

void ShmTransport::put_gather(int, int node, uint64_t offset, std::span<const PutPiece> source,
                              const SignalUpdate* signal) {
  check(node, offset, total_length(source), false);
  if (signal) check(node, signal->offset, 8, true);
  for (const PutPiece& piece : source) {
    if (piece.length > 0) std::memcpy(segment_.base + offset, piece.data, piece.length);
    offset += piece.length;
  }
  if (signal) {
    apply_signal(segment_, *signal);
  } else {
    std::atomic_thread_fence(std::memory_order_release);
  }
  doorbell_.ring();
}

void ShmTransport::get(int, int node, uint64_t offset, void* out, size_t length) {
  check(node, offset, length, false);
  if (length == 8 && offset % 8 == 0) {
    const uint64_t word = segment_word(segment_, offset).load(std::memory_order_acquire);
    std::memcpy(out, &word, sizeof(word));
    return;
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  if (length > 0) std::memcpy(out, segment_.base + offset, length);
}

void ShmTransport::atomic_add(int, int node, uint64_t offset, uint64_t value) {
  check(node, offset, 8, true);
  segment_word(segment_, offset).fetch_add(value, std::memory_order_acq_rel);
  doorbell_.ring();
}

uint64_t ShmTransport::atomic_fetch_add(int, int node, uint64_t offset, uint64_t value) {
  check(node, offset, 8, true);
  const uint64_t old = segment_word(segment_, offset).fetch_add(value, std::memory_order_acq_rel);
  doorbell_.ring();
  return old;
}

// Stores to shared memory are already visible in program order (x86-TSO); the fences keep
// the compiler from reordering around them.
void ShmTransport::fence(int) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}
void ShmTransport::quiet(int) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace symmesh
