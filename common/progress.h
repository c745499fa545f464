// How far a running job is, for the CLI's progress line: PE 0's main thread counts its timed
// iterations into the JobProgress the daemon bound to it; every other thread counts nothing.
#pragma once

#include <atomic>
#include <cstdint>

namespace symmesh::progress {

struct JobProgress {
  std::atomic<uint32_t> done{0};
  std::atomic<uint32_t> total{0};  // 0 until the job knows its iteration count
};

// Binds the calling thread to `progress` (nullptr: none) for this object's life.
class Binding {
 public:
  explicit Binding(JobProgress* progress);
  ~Binding();
  Binding(const Binding&) = delete;
  Binding& operator=(const Binding&) = delete;

 private:
  JobProgress* saved_;
};

// The job's timed iterations: set once they are known, then one step as each ends.
void set_total(uint32_t iterations);
void step();

}  // namespace symmesh::progress
