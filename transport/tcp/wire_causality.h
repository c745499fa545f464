// ThreadSanitizer cannot see that a byte sent on a TCP connection is received after it was
// sent: the two ends are different fds. When all nodes live in one process (LocalCluster,
// the tests), causality that runs through the wire (a PE sends a chunk, the peer reduces it
// and writes back into the sender's buffer) would look like a race. These annotations tell
// TSan what TCP guarantees: sending a frame on (from -> to, connection) releases, receiving
// a frame on it acquires. They compile to nothing outside TSan builds.
#pragma once

#include <cstdint>

namespace symmesh {

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* address);
extern "C" void __tsan_release(void* address);

inline void* wire_sync_object(int from_node, int to_node, uint32_t connection) {
  static char objects[4096];
  const uint64_t key = (uint64_t(from_node) * 1'000'003 + uint64_t(to_node)) * 131 + connection;
  return &objects[key % sizeof(objects)];
}
inline void wire_sent(int from_node, int to_node, uint32_t connection) {
  __tsan_release(wire_sync_object(from_node, to_node, connection));
}
inline void wire_received(int from_node, int to_node, uint32_t connection) {
  __tsan_acquire(wire_sync_object(from_node, to_node, connection));
}
#else
inline void wire_sent(int, int, uint32_t) {}
inline void wire_received(int, int, uint32_t) {}
#endif

}  // namespace symmesh
