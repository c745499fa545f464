// All-to-all and all-to-all-v by direct puts: each member writes its block for member j
// straight into j's dst (once j has entered the call) with a put_signal on a per-source
// slot. Cost: one step; each member sends (n-1)/n of its input. Members start with the
// member after them so that no PE is everybody's first target.
#include <cstring>

#include "common/trace.h"
#include "runtime/barrier.h"
#include "runtime/collectives.h"
#include "runtime/collectives/hierarchy.h"
#include "runtime/collectives/ring.h"

namespace symmesh {
namespace {

std::vector<int> everyone_but(const Team& team) {
  std::vector<int> others;
  for (int i = 0; i < team.size(); ++i) {
    if (i != team.my_index()) others.push_back(i);
  }
  return others;
}

// Sends blocks[j] of src to member j at that member's offset at[j]; waits for all blocks.
void exchange_blocks(Pe& pe, Team& team, std::byte* dst, const std::byte* src,
                     const std::vector<Range>& send, const std::vector<size_t>& at,
                     uint64_t sequence) {
  const int n = team.size();
  const int me = team.my_index();
  uint64_t* my_signal = pe.sync_slot(team, slot::kPerSource + me);
  for (int step = 0; step < n; ++step) {
    const int j = (me + step) % n;
    if (j != me) wait_entered(pe, team, sequence, j);
    pe.put_signal(dst + at[j], src + send[j].begin, send[j].count, my_signal, sequence,
                  SignalOp::kSet, team.pe(j));
  }
  for (int i = 0; i < n; ++i) {
    pe.signal_wait_until(
        pe.sync_slot(team, slot::kPerSource + i), Cmp::kGe, sequence, pe.deadline(),
        "all-to-all on team '" + team.name() + "' waiting for PE " + std::to_string(team.pe(i)),
        team.pe(i));
  }
}

// Every member sends values[j] to member j; returns what each member sent this one.
std::vector<uint64_t> alltoall_values(Pe& pe, Team& team, const std::vector<uint64_t>& values) {
  const uint64_t sequence = team.next_collective();
  const int me = team.my_index();
  for (int j = 0; j < team.size(); ++j) {
    pe.put_signal(pe.sync_slot(team, slot::kExchangeValue + me), &values[j], sizeof(uint64_t),
                  pe.sync_slot(team, slot::kPerSource + me), sequence, SignalOp::kSet, team.pe(j));
  }
  std::vector<uint64_t> received(team.size());
  for (int i = 0; i < team.size(); ++i) {
    pe.signal_wait_until(
        pe.sync_slot(team, slot::kPerSource + i), Cmp::kGe, sequence, pe.deadline(),
        "all-to-all-v counts waiting for PE " + std::to_string(team.pe(i)), team.pe(i));
    received[i] = pe.signal_fetch(pe.sync_slot(team, slot::kExchangeValue + i));
  }
  barrier(pe, team);  // the value slots are read before anyone writes them again
  return received;
}

}  // namespace

void alltoall(Pe& pe, Team& team, void* dst, const void* src, size_t count, DType dtype) {
  const trace::Scope span("alltoall", "collective");
  check_member(pe, team, "alltoall");
  const uint64_t sequence = team.next_collective();
  announce_entered(pe, team, sequence, everyone_but(team));
  const size_t bytes = count * dtype_size(dtype);
  std::vector<Range> send;
  std::vector<size_t> at(team.size(), team.my_index() * bytes);
  for (int j = 0; j < team.size(); ++j) send.push_back(Range{j * bytes, bytes});
  exchange_blocks(pe, team, static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), send,
                  at, sequence);
}

std::vector<size_t> alltoallv(Pe& pe, Team& team, void* dst, size_t dst_capacity, const void* src,
                              const std::vector<size_t>& send_counts, DType dtype) {
  check_member(pe, team, "alltoallv");
  const int n = team.size();
  if (send_counts.size() != size_t(n)) {
    throw InvalidArgument("alltoallv: " + std::to_string(send_counts.size()) +
                          " send counts for a team of " + std::to_string(n));
  }
  const size_t element = dtype_size(dtype);
  // Round 1: counts to receivers. Round 2: each receiver tells each sender where its
  // block goes (packed in member order).
  std::vector<uint64_t> counts(send_counts.begin(), send_counts.end());
  const std::vector<uint64_t> received = alltoall_values(pe, team, counts);
  std::vector<uint64_t> offsets(n);
  uint64_t total = 0;
  for (int i = 0; i < n; ++i) {
    offsets[i] = total * element;
    total += received[i];
  }
  if (total > dst_capacity) {
    // Everyone must still take part in round 2 and the exchange, so fail after them.
    offsets.assign(n, UINT64_MAX);
  }
  const std::vector<uint64_t> at = alltoall_values(pe, team, offsets);
  bool anyone_refused = false;
  for (uint64_t offset : at) anyone_refused = anyone_refused || offset == UINT64_MAX;
  if (anyone_refused) {
    throw InvalidArgument("alltoallv: a member's dst is too small for what it receives" +
                          (total > dst_capacity
                               ? " (this PE receives " + std::to_string(total) +
                                     " elements, room for " + std::to_string(dst_capacity) + ")"
                               : std::string()));
  }
  const uint64_t sequence = team.next_collective();
  announce_entered(pe, team, sequence, everyone_but(team));
  std::vector<Range> send;
  size_t begin = 0;
  for (int j = 0; j < n; ++j) {
    send.push_back(Range{begin * element, send_counts[j] * element});
    begin += send_counts[j];
  }
  exchange_blocks(pe, team, static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), send,
                  std::vector<size_t>(at.begin(), at.end()), sequence);
  return std::vector<size_t>(received.begin(), received.end());
}

}  // namespace symmesh
