// The CLI's progress line for a running job: "job 7 combine: iteration 3/20, 1.4 s elapsed,
// ETA 7.9 s", redrawn in place on stderr as the root's progress events arrive, shown only when
// stderr is a terminal and the job has run longer than a second (SYMMESH_PROGRESS_AFTER sets
// another threshold), and erased before the result is printed.
#pragma once

#include <chrono>
#include <string>

#include "wire/jobs.pb.h"

namespace symmesh {

class ProgressLine {
 public:
  ProgressLine(std::string kind, bool enabled, std::chrono::milliseconds after);
  ~ProgressLine();
  void update(const wire::JobEvent& event);
  void clear();

  // A terminal on stderr, and --json not asked for.
  static bool wanted(bool json);

 private:
  const std::string kind_;
  const bool enabled_;
  const std::chrono::milliseconds after_;
  bool drawn_ = false;
};

}  // namespace symmesh
