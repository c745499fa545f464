#include "common/trace.h"

#include <chrono>

namespace symmesh::trace {
namespace {

thread_local Context bound_context;
thread_local ThreadTrace* bound_thread = nullptr;

int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

int64_t steady_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Recorder::Recorder(size_t spans_per_thread)
    : spans_per_thread_(spans_per_thread), unix_minus_steady_ns_(unix_now_ns() - steady_now_ns()) {}

ThreadTrace* Recorder::add_thread(int pe, std::string name) {
  std::lock_guard lock(mutex_);
  ThreadTrace& thread = threads_.emplace_back();
  thread.pe = pe;
  thread.name = std::move(name);
  thread.spans.reserve(spans_per_thread_);
  return &thread;
}

Context current() {
  return bound_context;
}

ThreadBinding::ThreadBinding(Context context, std::string thread_name)
    : saved_context_(bound_context),
      saved_thread_(bound_thread),
      os_name_("pe" + std::to_string(context.pe) + " " + thread_name) {
  bound_context = context;
  bound_thread =
      context.recorder ? context.recorder->add_thread(context.pe, std::move(thread_name)) : nullptr;
}

ThreadBinding::~ThreadBinding() {
  bound_context = saved_context_;
  bound_thread = saved_thread_;
}

Scope::Scope(const char* name, const char* category, int peer) noexcept
    : thread_(bound_thread), name_(name), category_(category), peer_(peer) {
  if (thread_) start_ns_ = steady_now_ns();
}

Scope::~Scope() {
  if (!thread_) return;
  if (thread_->spans.size() == thread_->spans.capacity()) {
    ++thread_->dropped;
    return;
  }
  thread_->spans.push_back(Span{name_, category_, start_ns_, steady_now_ns(), peer_});
}

}  // namespace symmesh::trace
