#include "client/progress_line.h"

#include <unistd.h>

#include <cstdio>

#include "wire/enum_text.h"

namespace symmesh {

ProgressLine::ProgressLine(std::string kind, bool enabled, std::chrono::milliseconds after)
    : kind_(std::move(kind)), enabled_(enabled), after_(after) {}

ProgressLine::~ProgressLine() {
  clear();
}

bool ProgressLine::wanted(bool json) {
  return !json && isatty(STDERR_FILENO) == 1;
}

void ProgressLine::update(const wire::JobEvent& event) {
  if (!enabled_ || event.elapsed_s() * 1e3 < double(after_.count())) return;
  std::string line = "job " + std::to_string(event.job_id()) + " " + kind_ + ": ";
  char figures[128];
  if (event.iterations() == 0) {
    std::snprintf(figures, sizeof figures, "%s, %.1f s elapsed",
                  wire::enum_text(event.state()).c_str(), event.elapsed_s());
  } else if (event.iteration() == 0) {
    std::snprintf(figures, sizeof figures, "iteration 0/%u, %.1f s elapsed", event.iterations(),
                  event.elapsed_s());
  } else {
    const double eta =
        event.elapsed_s() / event.iteration() * (event.iterations() - event.iteration());
    std::snprintf(figures, sizeof figures, "iteration %u/%u, %.1f s elapsed, ETA %.1f s",
                  event.iteration(), event.iterations(), event.elapsed_s(), eta);
  }
  // \r and "erase to end of line": the line is redrawn in place.
  std::fprintf(stderr, "\r\033[K%s%s", line.c_str(), figures);
  std::fflush(stderr);
  drawn_ = true;
}

void ProgressLine::clear() {
  if (!drawn_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn_ = false;
}

}  // namespace symmesh
