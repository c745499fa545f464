// The comm threads' shared port: once the node is aborted a put or put_signal through it throws,
// naming the abort, and writes nothing (a failed call's peers stop instead of waiting on the
// wire).
#include "ops/roles/comm_port.h"

#include <gtest/gtest.h>

#include "tests/support/local_cluster.h"

namespace symmesh {
namespace {

TEST(CommPort, APutAfterTheNodeWasAbortedThrowsAndWritesNothing) {
  LocalCluster cluster(LocalClusterOptions{});
  std::string put_error, put_signal_error;
  uint64_t word_after = 1, signal_after = 1;
  cluster.run([&](Pe& pe) {
    auto* word = pe.malloc_array<uint64_t>(2);
    word[0] = word[1] = 0;
    const uint64_t value = 42;
    CommPort port(pe);
    pe.node().doorbell().abort("a peer failed");
    try {
      port.put(word, &value, 8, pe.my_pe());
    } catch (const AbortedError& e) {
      put_error = e.what();
    }
    try {
      port.put_signal(word, &value, 8, word + 1, 1, SignalOp::kAdd, pe.my_pe());
    } catch (const AbortedError& e) {
      put_signal_error = e.what();
    }
    pe.node().doorbell().clear_abort();
    word_after = word[0];
    signal_after = word[1];
    pe.free(word);
  });
  EXPECT_EQ(put_error, "PE 0: put to PE 0: aborted: a peer failed");
  EXPECT_EQ(put_signal_error, "PE 0: put_signal to PE 0: aborted: a peer failed");
  EXPECT_EQ(word_after, 0u);
  EXPECT_EQ(signal_after, 0u);
}

}  // namespace
}  // namespace symmesh
