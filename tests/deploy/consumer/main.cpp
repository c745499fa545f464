// One node of two PEs built from the installed runtime: PE 0 puts a block into PE 1's
// symmetric buffer with a signal, PE 1 waits for the signal and checks every word.
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "runtime/barrier.h"
#include "runtime/node.h"
#include "runtime/pe.h"

int main() {
  using namespace symmesh;
  NodeConfig config;
  config.ranks_per_node = 2;
  Node node(config);
  constexpr size_t kWords = 1024;
  bool intact = true;
  std::vector<std::thread> pes;
  for (int local = 0; local < 2; ++local) {
    pes.emplace_back([&, local] {
      Pe pe(node, local);
      auto* data = pe.malloc_array<uint64_t>(kWords);
      auto* signal = pe.malloc_array<uint64_t>(1);
      *signal = 0;
      barrier_all(pe);
      if (local == 0) {
        std::vector<uint64_t> block(kWords);
        for (size_t i = 0; i < kWords; ++i) block[i] = i * 7 + 1;
        pe.put_signal(data, block.data(), sizeof(uint64_t) * kWords, signal, 1, SignalOp::kSet, 1);
        pe.quiet();
      } else {
        pe.signal_wait_until(signal, Cmp::kEq, 1);
        for (size_t i = 0; i < kWords; ++i) intact = intact && data[i] == i * 7 + 1;
      }
      barrier_all(pe);
    });
  }
  for (auto& pe : pes) pe.join();
  std::printf("consumer: %s\n", intact ? "put_signal delivered every word" : "words differ");
  return intact ? 0 : 1;
}
