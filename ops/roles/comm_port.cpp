#include "ops/roles/comm_port.h"

namespace symmesh {

void CommPort::count(size_t bytes, int pe) {
  if (pe != pe_.my_pe()) wire_bytes_.fetch_add(bytes, std::memory_order_relaxed);
}

void CommPort::put(void* dest, const void* source, size_t bytes, int pe) {
  std::lock_guard lock(mutex_);
  pe_.put(dest, source, bytes, pe);
  count(bytes, pe);
}

void CommPort::get(void* dest, const void* source, size_t bytes, int pe) {
  std::lock_guard lock(mutex_);
  pe_.get(dest, source, bytes, pe);
  count(bytes, pe);
}

void CommPort::put_signal(void* dest, const void* source, size_t bytes, uint64_t* signal,
                          uint64_t value, SignalOp op, int pe) {
  std::lock_guard lock(mutex_);
  pe_.put_signal(dest, source, bytes, signal, value, op, pe);
  count(bytes, pe);
}

void CommPort::signal_set(uint64_t* signal, uint64_t value, int pe) {
  std::lock_guard lock(mutex_);
  pe_.signal_set(signal, value, pe);
}

void CommPort::signal_add(uint64_t* signal, uint64_t value, int pe) {
  std::lock_guard lock(mutex_);
  pe_.signal_add(signal, value, pe);
}

void CommPort::quiet() {
  std::lock_guard lock(mutex_);
  pe_.quiet();
}

}  // namespace symmesh
