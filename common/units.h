// Sizes as people write them: "256MiB", "64KiB", "1GiB", "4096".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace symmesh {

// Parses a byte size with an optional binary suffix (B, KiB, MiB, GiB, TiB; K, M, G, T are
// read as the same). Throws InvalidArgument naming `what` and the accepted forms.
uint64_t parse_size(const std::string& text, const std::string& what);
std::string format_bytes(uint64_t bytes);

// Parses a whole number in low..high (digits only). Throws InvalidArgument naming `what` and
// the range.
uint64_t parse_count(const std::string& text, const std::string& what, uint64_t low, uint64_t high);

// Parses a duration: a number with a unit, ms or s ("500ms", "60s"); a bare number is
// seconds. Throws InvalidArgument naming `what`.
std::chrono::milliseconds parse_duration(const std::string& text, const std::string& what);

}  // namespace symmesh
