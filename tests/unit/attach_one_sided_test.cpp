// The one-sided calls attached processes build messages on: a put_signal lands its bytes before
// its word, a get takes a peer's bytes and then sets the peer's done word, the wait for a word
// sees either and gives up at its timeout, and a call naming a PE, a word or bytes it may not
// is refused before anything is sent, the session going on.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/attached_node.h"

namespace symmesh {
namespace {

using OneSided = AttachedNode;

constexpr size_t kBytes = 64 * 1024;

// Each PE's symmetric regions, made in the same order on both.
struct Regions {
  explicit Regions(Session& session)
      : message(static_cast<std::byte*>(session.malloc(kBytes))),
        landing(static_cast<std::byte*>(session.malloc(kBytes))),
        words(static_cast<uint64_t*>(session.malloc(2 * sizeof(uint64_t)))) {
    words[0] = words[1] = 0;
  }
  std::byte* message;
  std::byte* landing;
  uint64_t* words;  // [0]: a message arrived; [1]: a message was taken
};

std::byte pattern(int pe, size_t i) {
  return std::byte((i * 131 + size_t(pe) * 7 + 3) & 0xff);
}

TEST_F(OneSided, APutSignalLandsBeforeItsWordAndAGetTellsTheSenderItIsDone) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([&](Session& session, int pe) {
    Regions at(session);
    session.barrier();  // both made their regions and zeroed their words
    const int peer = 1 - pe;
    for (size_t i = 0; i < kBytes; ++i) at.message[i] = pattern(pe, i);
    // Announce: my message's bytes into the peer's landing region, then its word 0.
    session.put_signal(at.landing, at.message, kBytes, &at.words[0], 7, peer);
    const uint64_t* arrived[] = {&at.words[0]};
    const uint64_t unset[] = {0};
    if (session.wait_for_word_change(arrived, unset, std::chrono::seconds(20)) != 0) {
      return std::string("no put_signal arrived");
    }
    if (at.words[0] != 7) return "word 0 is " + std::to_string(at.words[0]);
    for (size_t i = 0; i < kBytes; ++i) {
      if (at.landing[i] != pattern(peer, i)) return "put byte " + std::to_string(i) + " differs";
    }
    session.barrier();  // both checked their landing region: it may be overwritten
    // Take the peer's message with a get, and tell it so through its word 1.
    std::memset(at.landing, 0, kBytes);
    session.get(at.landing, at.message, kBytes, peer, &at.words[1], 9);
    for (size_t i = 0; i < kBytes; ++i) {
      if (at.landing[i] != pattern(peer, i)) return "got byte " + std::to_string(i) + " differs";
    }
    const uint64_t* taken[] = {&at.words[1]};
    if (session.wait_for_word_change(taken, unset, std::chrono::seconds(20)) != 0) {
      return std::string("the peer's get never set the done word");
    }
    return at.words[1] == 9 ? std::string("ok") : "word 1 is " + std::to_string(at.words[1]);
  });
  EXPECT_EQ(said, std::vector<std::string>(2, "ok"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

TEST_F(OneSided, AWaitForAWordThatDoesNotChangeEndsAtItsTimeout) {
  auto pes = start_session();
  const std::vector<int> seen = run_processes([&](Session& session, int) {
    Regions at(session);
    const uint64_t* words[] = {&at.words[0], &at.words[1]};
    const uint64_t values[] = {0, 0};
    const int none = session.wait_for_word_change(words, values, std::chrono::milliseconds(5));
    const uint64_t other[] = {0, 1};  // word 1 holds 0, not the 1 "seen"
    const int second = session.wait_for_word_change(words, other, std::chrono::seconds(5));
    return none * 10 + second;
  });
  EXPECT_EQ(seen, std::vector<int>(2, -10 + 1));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

TEST_F(OneSided, AWrongPeWordOrRangeIsRefusedBeforeAnythingIsSentAndTheSessionGoesOn) {
  auto pes = start_session();
  const std::vector<std::string> said = run_processes([&](Session& session, int pe) {
    Regions at(session);
    const auto* unaligned = reinterpret_cast<const uint64_t*>(at.message + 4);
    const uint64_t off_heap = 0;
    const std::vector<std::pair<std::string, std::function<void()>>> calls = {
        {"PE 2 is outside 0..1", [&] { session.get(at.landing, at.message, 8, 2); }},
        {"PE -1 is outside",
         [&] { session.put_signal(at.landing, at.message, 8, at.words, 1, -1); }},
        {"must be aligned to the 8-byte element",
         [&] { session.put_signal(at.landing, at.message, 8, unaligned, 1, 1 - pe); }},
        {"signal word is not on this PE's symmetric heap",
         [&] { session.get(at.landing, at.message, 8, 1 - pe, &off_heap, 1); }},
        {"source is not on this PE's symmetric heap",
         [&] { session.get(at.landing, &off_heap, 8, 1 - pe); }},
        {"the source overlaps the destination",
         [&] { session.get(at.message + 8, at.message, 64, pe); }},
        {"signal word is null",
         [&] { session.put_signal(at.landing, at.message, 8, nullptr, 1, 0); }},
    };
    std::string missing;
    for (const auto& [says, call] : calls) {
      const std::string wrong = refusal_missing(call, says, "");
      if (!wrong.empty()) missing += "[" + says + ": " + wrong + "] ";
    }
    session.barrier();  // the session still serves both
    return missing.empty() ? std::string("ok") : missing;
  });
  EXPECT_EQ(said, std::vector<std::string>(2, "ok"));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

}  // namespace
}  // namespace symmesh
