// What it costs to wake a PE parked on the node's doorbell, by where the waker and the sleeper
// run: one thread rings, the other parks until the ring and notes how long it took. A sleeper
// bound to an idle other CPU must have that CPU woken (on a virtual machine, an exit to the
// host); an unbound one is put where the scheduler finds room, often the waker's own CPU.
//   wake_latency [ROUNDS]   (default 2000; prints p50, p90 and p99 in microseconds)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/cpu_binding.h"
#include "transport/wait.h"

namespace symmesh {
namespace {

using Clock = std::chrono::steady_clock;

// Parks on `bell` until `turn` reaches `value`; gives up after 10 s (the other side died).
void wait_for_turn(Doorbell& bell, const std::atomic<int>& turn, int value) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    const uint32_t seen = bell.sequence();
    if (turn.load() == value) return;
    if (Clock::now() > deadline) {
      std::fprintf(stderr, "wake_latency: turn %d not reached within 10 s\n", value);
      std::exit(1);
    }
    bell.park(seen, std::chrono::milliseconds(100));
  }
}

// Rounds of ring-then-park ping-pong; returns each round's wake-up latency in microseconds.
std::vector<double> measure(std::optional<int> waker_cpu, std::optional<int> sleeper_cpu,
                            int rounds) {
  Doorbell bell;
  std::atomic<int> turn{0};  // even: the waker's, odd: the sleeper's
  std::atomic<Clock::rep> rung_at{0};
  std::vector<double> latencies;
  std::thread sleeper([&] {
    const ScopedCpuBinding bound(sleeper_cpu);
    for (int round = 0; round < rounds; ++round) {
      wait_for_turn(bell, turn, 2 * round + 1);
      const Clock::duration woke_after(Clock::now().time_since_epoch().count() - rung_at.load());
      latencies.push_back(std::chrono::duration<double, std::micro>(woke_after).count());
      turn.store(2 * round + 2);
      bell.ring();
    }
  });
  {
    const ScopedCpuBinding bound(waker_cpu);
    for (int round = 0; round < rounds; ++round) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // the sleeper parks meanwhile
      rung_at.store(Clock::now().time_since_epoch().count());
      turn.store(2 * round + 1);
      bell.ring();
      wait_for_turn(bell, turn, 2 * round + 2);
    }
  }
  sleeper.join();
  std::sort(latencies.begin(), latencies.end());
  return latencies;
}

void report(const std::string& what, const std::vector<double>& sorted) {
  auto at = [&](double q) { return sorted[size_t(q * double(sorted.size() - 1))]; };
  std::printf("| %-44s | %8.1f | %8.1f | %8.1f |\n", what.c_str(), at(0.5), at(0.9), at(0.99));
}

}  // namespace
}  // namespace symmesh

int main(int argc, char** argv) {
  using namespace symmesh;
  const int rounds = argc > 1 ? std::max(10, std::atoi(argv[1])) : 2000;
  const std::vector<int> cpus = allowed_cpus();
  std::printf("waking a thread parked on the doorbell, %d rounds, us\n", rounds);
  std::printf("| %-44s | %8s | %8s | %8s |\n", "waker and sleeper", "p50", "p90", "p99");
  report("unbound (where the scheduler puts them)", measure(std::nullopt, std::nullopt, rounds));
  if (cpus.empty()) return 0;
  report("bound to one CPU, the same", measure(cpus[0], cpus[0], rounds));
  if (cpus.size() > 1) {
    report("bound to two CPUs (the sleeper's CPU idle)", measure(cpus[0], cpus[1], rounds));
  }
  return 0;
}
