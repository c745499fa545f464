// Private memory the PEs of one node lend each other for one call: a borrower gets what was
// lent for its call, and nothing before the loan began, once it ended, or lent for another
// call; ending a loan waits for its borrowers, through an abort, up to a deadline; a call's end
// waits for its peers' use of its memory, and aborts the node's waits when the call failed or
// a barrier let it out early.
#include "runtime/loan_scope.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
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

// Waits for `flag` with a deadline, through an abort; true once it was set.
bool wait_for(Pe& pe, const std::atomic<bool>& flag) {
  WaitPolicy policy;
  policy.abortable = false;
  try {
    wait_until(
        pe.node().doorbell(), deadline_after(30s), [&] { return flag.load(); },
        [] { return std::string("the flag"); }, policy);
    return true;
  } catch (const TimeoutError&) {
    return false;
  }
}

// Waits until local rank `lender`'s first loan has ended (borrowing it fails), with a deadline.
bool wait_until_ended(Pe& pe, int lender) {
  LocalLoans& loans = pe.node().loans();
  for (const Deadline deadline = deadline_after(30s); Clock::now() < deadline;) {
    try {
      loans.borrow(lender, 1);
    } catch (const PeerError&) {
      return true;
    }
    loans.give_back(lender, pe.node().doorbell());
    std::this_thread::yield();
  }
  return false;
}

TEST(LocalLoans, ABorrowerGetsWhatWasLentAndNothingOutsideTheLoan) {
  LocalLoans loans(2);
  Doorbell bell;
  std::vector<std::byte> a(16);
  EXPECT_THROW(loans.borrow(0, 1), PeerError);  // not lent yet
  EXPECT_EQ(loans.lend(0, a), 1u);
  EXPECT_EQ(loans.lend(1, {}, /*discard=*/true), 1u);
  EXPECT_THROW(loans.borrow(0, 2), PeerError);  // lent for another call
  const LocalLoans::Borrowed got = loans.borrow(0, 1);
  EXPECT_EQ(got.memory.data(), a.data());
  EXPECT_EQ(got.memory.size(), 16u);
  EXPECT_FALSE(got.discard);
  EXPECT_TRUE(loans.borrow(1, 1).discard);
  EXPECT_EQ(loans.borrowers(0), 1);
  EXPECT_THROW(loans.lend(0, a), Error);  // its loan is still open
  loans.give_back(0, bell);
  loans.give_back(1, bell);
  EXPECT_TRUE(loans.end(0, bell, deadline_after(1s)));
  EXPECT_THROW(loans.borrow(0, 1), PeerError);  // ended
  EXPECT_EQ(loans.lend(0, a), 2u);
  EXPECT_THROW(loans.borrow(0, 1), PeerError);  // the next call's
  EXPECT_THROW(loans.borrow(2, 1), InvalidArgument);
  EXPECT_TRUE(loans.end(0, bell, deadline_after(1s)));
  EXPECT_TRUE(loans.end(1, bell, deadline_after(1s)));
  loans.reset();
  EXPECT_EQ(loans.lend(0, a), 1u);
}

TEST(LocalLoans, EndingALoanWaitsForItsBorrowersThroughAnAbortUpToItsDeadline) {
  LocalLoans loans(1);
  Doorbell bell;
  loans.borrow(0, loans.lend(0, {}));
  bell.abort("a peer failed");
  const Deadline deadline = deadline_after(50ms);
  EXPECT_FALSE(loans.end(0, bell, deadline));
  EXPECT_GE(Clock::now(), deadline);  // the abort did not end it
  loans.give_back(0, bell);
  EXPECT_TRUE(loans.end(0, bell, deadline_after(50ms)));
}

// PE 1 still writes into PE 0's rows once PE 0 has ended its loan: PE 0's end waits for it and
// aborts the node's waits, whether the call failed or a barrier let PE 0 out early.
void expect_end_waits_for_the_peers_write(bool complete) {
  LocalCluster cluster(one_node_of_two());
  std::vector<std::byte> lent(8);
  std::atomic<bool> borrowed{false};
  bool written_before_return = false, peer_saw_the_end = false, saw_borrowed = false,
       aborted = false;
  cluster.run([&](Pe& pe) {
    if (pe.local_rank() == 0) {
      {
        LoanScope scope(pe, lent);
        barrier_all(pe);
        scope.borrow_all();
        scope.done_using();
        if (complete) scope.complete();
        saw_borrowed = wait_for(pe, borrowed);
      }
      written_before_return = lent[0] == std::byte{7};
      aborted = pe.node().doorbell().aborted();
    } else {
      LoanScope scope(pe, {});
      barrier_all(pe);
      const std::vector<LocalLoans::Borrowed>& rows = scope.borrow_all();
      borrowed = true;
      peer_saw_the_end = wait_until_ended(pe, 0);  // writes only once PE 0 ended its loan
      rows[0].memory[0] = std::byte{7};
      scope.done_using();
      scope.complete();
    }
  });
  EXPECT_TRUE(saw_borrowed);
  EXPECT_TRUE(peer_saw_the_end);
  EXPECT_TRUE(written_before_return);
  EXPECT_TRUE(aborted);
}

TEST(LoanScope, AFailedCallAbortsTheNodeAndWaitsForItsPeersWrites) {
  expect_end_waits_for_the_peers_write(/*complete=*/false);
}

TEST(LoanScope, ACallLetOutEarlyByABarrierWaitsForItsPeersWrites) {
  expect_end_waits_for_the_peers_write(/*complete=*/true);
}

TEST(LoanScope, APeerThatComesAfterTheCallEndedGetsAnErrorNotTheMemory) {
  LocalCluster cluster(one_node_of_two());
  std::atomic<bool> ended{false};
  std::string error;
  cluster.run([&](Pe& pe) {
    std::vector<std::byte> lent(8);
    if (pe.local_rank() == 0) {
      {
        LoanScope scope(pe, lent);
        scope.complete();
      }
      ended = true;
      return;
    }
    LoanScope scope(pe, lent);
    if (!wait_for(pe, ended)) return;
    try {
      scope.borrow_all();
    } catch (const PeerError& e) {
      error = e.what();
    }
    scope.complete();
  });
  EXPECT_NE(error.find("local rank 0 has not lent for this call (its loan 1; it is at loan 1, "
                       "ended)"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace symmesh
