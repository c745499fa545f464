#include "common/units.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <utility>

#include "common/errors.h"

namespace symmesh {

uint64_t parse_size(const std::string& text, const std::string& what) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string suffix = text.substr(digits);
  static const std::pair<const char*, int> kSuffixes[] = {
      {"", 0},     {"B", 0},  {"K", 10},   {"KiB", 10}, {"M", 20},
      {"MiB", 20}, {"G", 30}, {"GiB", 30}, {"T", 40},   {"TiB", 40}};
  int shift = -1;
  for (const auto& [name, bits] : kSuffixes) {
    if (suffix == name) shift = bits;
  }
  if (digits == 0 || digits > 15 || shift < 0) {
    throw InvalidArgument(what + ": '" + text +
                          "' is not a size (a number with an optional suffix B, KiB, MiB, GiB "
                          "or TiB, for example 64MiB)");
  }
  return std::stoull(text.substr(0, digits)) << shift;
}

uint64_t parse_count(const std::string& text, const std::string& what, uint64_t low,
                     uint64_t high) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < low ||
      value > high) {
    throw InvalidArgument(what + ": '" + text + "' is not an integer in " + std::to_string(low) +
                          ".." + std::to_string(high));
  }
  return value;
}

std::chrono::milliseconds parse_duration(const std::string& text, const std::string& what) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string unit = text.substr(digits);
  if (digits == 0 || digits > 9 || (unit != "" && unit != "s" && unit != "ms")) {
    throw InvalidArgument(what + ": '" + text +
                          "' is not a duration (a number with unit s or ms, for example 30s)");
  }
  const long value = std::stol(text.substr(0, digits));
  return unit == "ms" ? std::chrono::milliseconds(value) : std::chrono::seconds(value);
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    snprintf(text, sizeof(text), "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    snprintf(text, sizeof(text), "%.1f %s", value, units[unit]);
  }
  return text;
}

}  // namespace symmesh
