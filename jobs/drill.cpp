#include "jobs/drill.h"

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "common/errors.h"

namespace symmesh {
namespace {

constexpr const char* kVariable = "SYMMESH_DRILL_SLOW_PE";
constexpr int kMostMilliseconds = 60'000;

bool parse_int(std::string_view text, int& value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

SlowPeDrill parse_slow_pe_drill(std::string_view text) {
  if (text.empty()) return {};
  const size_t colon = text.find(':');
  SlowPeDrill drill;
  if (colon == std::string_view::npos || !parse_int(text.substr(0, colon), drill.pe) ||
      !parse_int(text.substr(colon + 1), drill.milliseconds) || drill.pe < 0 ||
      drill.milliseconds < 0 || drill.milliseconds > kMostMilliseconds) {
    throw InvalidArgument(std::string(kVariable) + " is '" + std::string(text) +
                          "'; allowed: PE:MILLISECONDS, a PE number and 0.." +
                          std::to_string(kMostMilliseconds) + " ms");
  }
  return drill;
}

void drill_before_call(int pe) {
  // The daemon's environment, read and parsed once (a malformed value throws at every call).
  static const SlowPeDrill drill = [] {
    const char* text = std::getenv(kVariable);
    return parse_slow_pe_drill(text ? text : "");
  }();
  if (drill.pe == pe) std::this_thread::sleep_for(std::chrono::milliseconds(drill.milliseconds));
}

}  // namespace symmesh
