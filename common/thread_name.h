// The name the operating system shows for a thread (top -H, ps -L, perf --sort comm, gdb), so a
// daemon's threads can be told apart: "io 0", "pe 3", "pe3 forward ch0".
#pragma once

#include <string>
#include <string_view>

namespace symmesh {

// Names the calling thread; Linux keeps the first 15 bytes.
void set_thread_name(std::string_view name);
// The calling thread's name.
std::string thread_name();

// Names the calling thread for this object's life; its previous name comes back afterwards.
class ScopedThreadName {
 public:
  explicit ScopedThreadName(std::string_view name);
  ~ScopedThreadName();
  ScopedThreadName(const ScopedThreadName&) = delete;
  ScopedThreadName& operator=(const ScopedThreadName&) = delete;

 private:
  std::string saved_;
};

}  // namespace symmesh
