// A processing element: one rank's view of the runtime, with the OpenSHMEM names users know.
// Symmetric addresses are pointers into this PE's own slice; the same pointer names the same
// object on every PE, and the runtime turns it into (node, segment offset) for the transport.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/layout.h"
#include "runtime/node.h"
#include "runtime/peer_waits.h"
#include "runtime/team.h"

namespace symmesh {

enum class Cmp { kEq, kNe, kGt, kGe, kLt, kLe };
const char* cmp_name(Cmp cmp);
bool compare(uint64_t seen, Cmp cmp, uint64_t value);
// An error as PE `pe` reports it: "PE <pe>: <what>", unless `what` names a PE already (most
// wait errors do), so no message reads "PE 0: PE 0:".
std::string pe_error(int pe, const std::string& what);

class Pe {
 public:
  Pe(Node& node, int local_rank);

  int my_pe() const { return my_pe_; }
  int n_pes() const { return node_.n_pes(); }
  int my_node() const { return node_.rank(); }
  int local_rank() const { return local_rank_; }
  int node_of(int pe) const { return pe / node_.ranks_per_node(); }
  int local_rank_of(int pe) const { return pe % node_.ranks_per_node(); }
  Node& node() { return node_; }
  Deadline deadline() const { return deadline_after(node_.wait_timeout()); }

  // Symmetric heap. Every PE must make the same calls in the same order.
  void* malloc(size_t bytes, size_t alignment = 64);
  template <class T>
  T* malloc_array(size_t count) {
    return static_cast<T*>(malloc(count * sizeof(T), std::max<size_t>(alignof(T), 64)));
  }
  void free(void* address);
  // A direct pointer to `address` on `pe` when it shares this node's memory, else nullptr.
  void* ptr(const void* address, int pe) const;
  // The offset of a symmetric address inside a slice; throws when it is not in this slice.
  uint64_t slice_offset(const void* address) const;
  // `bytes` of this PE's user heap at slice offset `offset` (what another process names when
  // it shares the heap); throws InvalidArgument naming the range and the heap's bounds.
  std::byte* heap_range(uint64_t offset, uint64_t bytes);

  // One-sided operations (OpenSHMEM semantics). Once the node is aborted, none starts: each
  // throws AbortedError naming itself, its target and the abort, and writes nothing. fence and
  // quiet still run over tcp; over verbs they, and an operation already under way, stop at
  // their next wait (what they started completes or is flushed; the next job's flush between
  // jobs drains it). A bad address or PE is an InvalidArgument first.
  void put(void* dest, const void* source, size_t bytes, int pe);
  void put_nbi(void* dest, const void* source, size_t bytes, int pe);
  void get(void* dest, const void* source, size_t bytes, int pe);
  void atomic_add(uint64_t* dest, uint64_t value, int pe);
  uint64_t atomic_fetch_add(uint64_t* dest, uint64_t value, int pe);
  // The data, then the signal word (set or add); the signal is never visible before the data.
  void put_signal(void* dest, const void* source, size_t bytes, uint64_t* signal,
                  uint64_t signal_value, SignalOp op, int pe);
  // The same with the data gathered from pieces, written end to end from `dest`: records whose
  // parts lie apart go out without first being copied together.
  void put_signal(void* dest, std::span<const PutPiece> source, uint64_t* signal,
                  uint64_t signal_value, SignalOp op, int pe);
  void signal_set(uint64_t* signal, uint64_t value, int pe);
  void signal_add(uint64_t* signal, uint64_t value, int pe);
  // Waits until the local word `signal` compares true against `value`; returns what it saw.
  // The time it blocks is counted in peer_waits(), as `from_pe`'s: the one peer whose write
  // ends the wait (-1: a word several peers write).
  uint64_t signal_wait_until(const uint64_t* signal, Cmp cmp, uint64_t value);
  uint64_t signal_wait_until(const uint64_t* signal, Cmp cmp, uint64_t value, WaitDeadline deadline,
                             std::string_view what = "signal_wait_until", int from_pe = -1);
  uint64_t signal_fetch(const uint64_t* signal) const;
  void fence();
  void quiet();

  // Teams: world, the PEs of this node, and the PEs sharing this local rank on every node.
  Team& team_world() { return *world_; }
  Team& team_node() { return *node_team_; }
  Team& team_cross() { return *cross_team_; }
  // Collective over `parent`: the strided sub-team, or nullptr on PEs not in it.
  std::shared_ptr<Team> team_split_strided(Team& parent, int start, int stride, int size,
                                           const std::string& name = "split");
  void team_destroy(const Team& team);
  // The team of the PEs on the nodes whose bit is set in `nodes` (PE order), for one call that
  // leaves the other nodes out: an elastic session's, once it has lost some. It is made without
  // the world (the nodes left out may be gone), on a team index of its own, and its counters
  // start past everything any such team before it reached on any of its members: its members
  // agree on the start with one round among themselves (a Lamport clock). So a call that failed
  // part-way on some PEs, or members that were left out of different calls before, leave
  // nothing in the slots that this team could pass early. Every member makes the same such
  // teams in the same order, and every call on one waits for each member at least once (a
  // barrier or an exchange) before a member makes its next. Throws InvalidArgument when `nodes`
  // names a node past the cluster's, or not this PE's, or the cluster has more than 64 nodes.
  std::unique_ptr<Team> team_of_nodes(uint64_t nodes);

  // This PE's sync slot of a team (its local address) and its team scratch.
  uint64_t* sync_slot(const Team& team, int slot_number);
  std::byte* team_scratch(const Team& team);

  // Small exchange: every member's value, in team order (collective over `team`).
  std::vector<uint64_t> exchange(Team& team, uint64_t value);

  // How long this PE has waited for each peer (the waits that name one).
  PeerWaits& peer_waits() { return peer_waits_; }
  const PeerWaits& peer_waits() const { return peer_waits_; }

 private:
  uint64_t segment_offset(const void* address, int pe) const;
  // put_signal, signal_set and signal_add, each named `name` in errors.
  void update_signal(void* dest, std::span<const PutPiece> source, uint64_t* signal, uint64_t value,
                     SignalOp op, int pe, const char* name);
  // The transport to `pe` for a one-sided operation `op` about to start. Once the node is
  // aborted it throws AbortedError naming `op` and the abort instead: a failed call's PEs stop at
  // their next operation rather than start puts that may each wait for the wire up to the
  // transport's timeout (a put of the caller's memory waits even through an abort).
  Transport& transport(int pe, const char* op);

  Node& node_;
  int local_rank_;
  int my_pe_;
  std::byte* slice_base_;
  std::shared_ptr<Team> world_;
  std::shared_ptr<Team> node_team_;
  std::shared_ptr<Team> cross_team_;
  uint64_t free_team_indices_;        // bit i set: team index i is free on this PE
  uint64_t epoch_floor_ = 0;          // the highest counter a destroyed team reached
  uint64_t nodes_clock_ = 0;          // the highest counter start a team_of_nodes() used, / 2^24
  std::vector<uint64_t> clock_read_;  // per PE: the last proposal read from it
  PeerWaits peer_waits_;
};

}  // namespace symmesh
