#include "common/progress.h"

namespace symmesh::progress {
namespace {

thread_local JobProgress* bound = nullptr;

}  // namespace

Binding::Binding(JobProgress* progress) : saved_(bound) {
  bound = progress;
}

Binding::~Binding() {
  bound = saved_;
}

void set_total(uint32_t iterations) {
  if (bound) bound->total.store(iterations, std::memory_order_relaxed);
}

void step() {
  if (bound) bound->done.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace symmesh::progress
