#include "common/thread_name.h"

#include <pthread.h>

namespace symmesh {
namespace {

constexpr size_t kMaxNameBytes = 15;  // the kernel's TASK_COMM_LEN, less the terminator

}  // namespace

void set_thread_name(std::string_view name) {
  const std::string truncated(name.substr(0, kMaxNameBytes));
  pthread_setname_np(pthread_self(), truncated.c_str());
}

std::string thread_name() {
  char name[kMaxNameBytes + 1] = {};
  if (pthread_getname_np(pthread_self(), name, sizeof(name)) != 0) return {};
  return name;
}

ScopedThreadName::ScopedThreadName(std::string_view name) : saved_(thread_name()) {
  set_thread_name(name);
}

ScopedThreadName::~ScopedThreadName() {
  set_thread_name(saved_);
}

}  // namespace symmesh
