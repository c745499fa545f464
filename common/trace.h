// Job timelines: spans (a name, a category, a start and an end) that the threads of
// a job record into preallocated per-thread buffers, so recording never allocates or locks.
// Off unless a job asks for it: on a thread bound to no recorder a span costs one
// thread-local load. A full buffer keeps its earliest spans and counts the rest as dropped.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

#include "common/thread_name.h"

namespace symmesh::trace {

// Names and categories are string literals: a span stores only the pointers.
struct Span {
  const char* name;
  const char* category;
  int64_t start_ns;  // steady clock
  int64_t end_ns;
  int peer = -1;  // a wait's: the PE whose write ends it (-1: none, or several)
};

// The spans of one thread working for one PE, in the order they ended.
struct ThreadTrace {
  int pe = 0;
  std::string name;
  std::vector<Span> spans;  // capacity fixed when the thread binds
  uint64_t dropped = 0;
};

// One job's spans on one node.
class Recorder {
 public:
  explicit Recorder(size_t spans_per_thread = kSpansPerThread);
  // A new buffer for a thread; safe to call from any thread.
  ThreadTrace* add_thread(int pe, std::string name);
  // Once every bound thread has finished: the buffers, in the order the threads bound.
  const std::deque<ThreadTrace>& threads() const { return threads_; }
  // Converts a steady-clock time of this process to Unix time, so that nodes on different
  // hosts line up as well as their clocks do (exactly, for nodes on one host).
  int64_t unix_ns(int64_t steady_ns) const { return steady_ns + unix_minus_steady_ns_; }

  static constexpr size_t kSpansPerThread = 16384;  // 640 KiB a thread

 private:
  const size_t spans_per_thread_;
  const int64_t unix_minus_steady_ns_;
  std::mutex mutex_;
  std::deque<ThreadTrace> threads_;  // a deque: buffers never move once handed out
};

// What a thread that starts helper threads hands them, so their spans join the same job.
struct Context {
  Recorder* recorder = nullptr;
  int pe = 0;
};
// The calling thread's context (no recorder when tracing is off).
Context current();

// Binds the calling thread to a new buffer of context.recorder (none: tracing stays off) for
// this object's life; the thread's previous binding comes back afterwards. Traced or not, the
// thread carries the name "pe<P> <thread_name>" meanwhile (common/thread_name.h).
class ThreadBinding {
 public:
  ThreadBinding(Context context, std::string thread_name);
  ~ThreadBinding();
  ThreadBinding(const ThreadBinding&) = delete;
  ThreadBinding& operator=(const ThreadBinding&) = delete;

 private:
  Context saved_context_;
  ThreadTrace* saved_thread_;
  ScopedThreadName os_name_;
};

int64_t steady_now_ns();

// Records [construction, destruction) as a span of the calling thread, when it is bound.
// `peer`: the PE a wait waits for (-1: none, or several).
class Scope {
 public:
  Scope(const char* name, const char* category, int peer = -1) noexcept;
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  ThreadTrace* thread_;
  const char* name_;
  const char* category_;
  int peer_;
  int64_t start_ns_ = 0;
};

}  // namespace symmesh::trace
