// Private memory the PEs of one node lend each other for one call: peers see what each lent;
// a wait for the node's writers outlives an abort and ends at its deadline; a call that ended
// early waits for its peers' writes before its memory may go, and one that completed does not
// wait for the next call's writers.
#include "runtime/loan_scope.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "runtime/barrier.h"
#include "tests/support/local_cluster.h"

namespace symmesh {
namespace {

using namespace std::chrono_literals;

LocalClusterOptions one_node_of_two() {
  LocalClusterOptions o;
  o.ranks_per_node = 2;
  o.wait_timeout = 20s;
  return o;
}

// Waits for `flag` with a deadline; true once it was set.
bool wait_for(Pe& pe, const std::atomic<bool>& flag) {
  try {
    wait_until(
        pe.node().doorbell(), deadline_after(30s), [&] { return flag.load(); },
        [] { return std::string("the flag"); });
    return true;
  } catch (const TimeoutError&) {
    return false;
  }
}

TEST(LocalLoans, PeersSeeWhatEachLentAndEachLenderIsAWriterUntilDone) {
  LocalLoans loans(2);
  Doorbell bell;
  std::vector<std::byte> a(16), b(8);
  loans.lend(0, a);
  loans.lend(1, b);
  EXPECT_EQ(loans.lent(0).data(), a.data());
  EXPECT_EQ(loans.lent(0).size(), 16u);
  EXPECT_EQ(loans.lent(1).data(), b.data());
  EXPECT_EQ(loans.writers(), 2);
  loans.done_writing(bell);
  loans.done_writing(bell);
  EXPECT_EQ(loans.writers(), 0);
  EXPECT_THROW(loans.lend(2, a), InvalidArgument);
}

TEST(LocalLoans, AWaitForWritersOutlivesAnAbortAndEndsAtItsDeadline) {
  LocalLoans loans(1);
  Doorbell bell;
  loans.lend(0, {});
  bell.abort("a peer failed");
  const Deadline deadline = deadline_after(50ms);
  EXPECT_FALSE(loans.wait_until_no_writer(bell, deadline));
  EXPECT_GE(Clock::now(), deadline);  // the abort did not end it
  loans.done_writing(bell);
  EXPECT_TRUE(loans.wait_until_no_writer(bell, deadline_after(50ms)));
}

TEST(LoanScope, ACallThatEndedEarlyWaitsForItsPeersWrites) {
  LocalCluster cluster(one_node_of_two());
  std::vector<std::byte> lent(8);
  std::atomic<bool> leaving{false};
  bool written_before_return = false, peer_saw_leaving = false;
  cluster.run([&](Pe& pe) {
    if (pe.local_rank() == 0) {
      {
        LoanScope scope(pe, lent);
        barrier_all(pe);
        leaving = true;  // and leaves without complete(), as a throw would
      }
      written_before_return = lent[0] == std::byte{7};
    } else {
      LoanScope scope(pe, {});
      barrier_all(pe);
      peer_saw_leaving = wait_for(pe, leaving);  // writes only once PE 0 is leaving
      pe.node().loans().lent(0)[0] = std::byte{7};
      scope.done_writing();
      scope.complete();
    }
  });
  EXPECT_TRUE(peer_saw_leaving);
  EXPECT_TRUE(written_before_return);
}

TEST(LoanScope, ACompletedCallDoesNotWaitForTheNextCallsWriters) {
  LocalCluster cluster(one_node_of_two());
  std::atomic<bool> returned{false};
  bool next_call_saw_it = false;
  cluster.run([&](Pe& pe) {
    std::vector<std::byte> lent(8);
    {
      LoanScope scope(pe, lent);
      barrier_all(pe);
      scope.done_writing();
      barrier_all(pe);  // the call's closing barrier
      scope.complete();
    }
    if (pe.local_rank() == 0) {
      returned = true;
      return;
    }
    LoanScope next(pe, lent);  // a writer until PE 0 is out of its call
    next_call_saw_it = wait_for(pe, returned);
    next.done_writing();
    next.complete();
  });
  EXPECT_TRUE(next_call_saw_it);
}

}  // namespace
}  // namespace symmesh
