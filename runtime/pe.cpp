#include "runtime/pe.h"

#include <algorithm>

#include "common/trace.h"

#include "runtime/barrier.h"

namespace symmesh {
namespace {

constexpr int kWorldIndex = 0;
constexpr int kNodeIndex = 1;
constexpr int kCrossIndex = 2;
constexpr int kNodesIndex = 3;  // team_of_nodes()'s
// Counters each team_of_nodes() team may use: a MoE call takes a handful.
constexpr uint64_t kEpochsPerTeamOfNodes = uint64_t{1} << 24;

std::vector<int> range_members(int start, int stride, int count) {
  std::vector<int> members;
  for (int i = 0; i < count; ++i) members.push_back(start + i * stride);
  return members;
}

}  // namespace

const char* cmp_name(Cmp cmp) {
  switch (cmp) {
    case Cmp::kEq:
      return "==";
    case Cmp::kNe:
      return "!=";
    case Cmp::kGt:
      return ">";
    case Cmp::kGe:
      return ">=";
    case Cmp::kLt:
      return "<";
    case Cmp::kLe:
      return "<=";
  }
  return "?";
}

std::string pe_error(int pe, const std::string& what) {
  return what.starts_with("PE ") ? what : "PE " + std::to_string(pe) + ": " + what;
}

bool compare(uint64_t seen, Cmp cmp, uint64_t value) {
  switch (cmp) {
    case Cmp::kEq:
      return seen == value;
    case Cmp::kNe:
      return seen != value;
    case Cmp::kGt:
      return seen > value;
    case Cmp::kGe:
      return seen >= value;
    case Cmp::kLt:
      return seen < value;
    case Cmp::kLe:
      return seen <= value;
  }
  return false;
}

Pe::Pe(Node& node, int local_rank)
    : node_(node),
      local_rank_(local_rank),
      my_pe_(node.rank() * node.ranks_per_node() + local_rank),
      slice_base_(node.segment().base + local_rank * node.slice_bytes()),
      peer_waits_(node.n_pes()) {
  if (local_rank < 0 || local_rank >= node.ranks_per_node()) {
    throw InvalidArgument("local rank " + std::to_string(local_rank) + " outside 0.." +
                          std::to_string(node.ranks_per_node() - 1));
  }
  const int per_node = node.ranks_per_node();
  world_ = std::make_shared<Team>("world", kWorldIndex, range_members(0, 1, node.n_pes()), my_pe_,
                                  per_node);
  node_team_ = std::make_shared<Team>(
      "node", kNodeIndex, range_members(node.rank() * per_node, 1, per_node), my_pe_, per_node);
  cross_team_ = std::make_shared<Team>(
      "cross", kCrossIndex, range_members(local_rank, per_node, node.nodes()), my_pe_, per_node);
  world_->node_part = node_team_;
  world_->cross_part = cross_team_;
  free_team_indices_ = ((uint64_t{1} << kMaxTeams) - 1) & ~uint64_t{0b1111};
}

void* Pe::malloc(size_t bytes, size_t alignment) {
  try {
    return slice_base_ + node_.allocator(local_rank_).allocate(bytes, alignment);
  } catch (const HeapExhausted& e) {
    throw HeapExhausted("PE " + std::to_string(my_pe_) + ": " + e.what());
  }
}

void Pe::free(void* address) {
  if (address == nullptr) return;
  node_.allocator(local_rank_).release(slice_offset(address));
}

uint64_t Pe::slice_offset(const void* address) const {
  const auto* byte = static_cast<const std::byte*>(address);
  if (byte < slice_base_ || byte >= slice_base_ + node_.slice_bytes()) {
    throw InvalidArgument("PE " + std::to_string(my_pe_) +
                          ": address is not in the symmetric heap (allocate it with the "
                          "symmetric malloc)");
  }
  return static_cast<uint64_t>(byte - slice_base_);
}

std::byte* Pe::heap_range(uint64_t offset, uint64_t bytes) {
  const uint64_t end = node_.slice_bytes();
  if (offset < kReservedBytes || offset > end || bytes > end - offset) {
    throw InvalidArgument("PE " + std::to_string(my_pe_) + ": bytes [" + std::to_string(offset) +
                          ", +" + std::to_string(bytes) + ") are outside its symmetric heap [" +
                          std::to_string(kReservedBytes) + ", " + std::to_string(end) + ")");
  }
  return slice_base_ + offset;
}

uint64_t Pe::segment_offset(const void* address, int pe) const {
  if (pe < 0 || pe >= n_pes()) {
    throw InvalidArgument("PE " + std::to_string(pe) + " outside 0.." +
                          std::to_string(n_pes() - 1));
  }
  return uint64_t(local_rank_of(pe)) * node_.slice_bytes() + slice_offset(address);
}

void* Pe::ptr(const void* address, int pe) const {
  if (node_of(pe) != my_node()) return nullptr;
  return node_.segment().base + segment_offset(address, pe);
}

Transport& Pe::transport(int pe, const char* op) {
  const Doorbell& bell = node_.doorbell();
  if (bell.aborted()) {
    throw AbortedError("PE " + std::to_string(my_pe_) + ": " + op + " to PE " + std::to_string(pe) +
                       ": aborted: " + bell.abort_reason());
  }
  return node_.transport_to(node_of(pe));
}

void Pe::put(void* dest, const void* source, size_t bytes, int pe) {
  const uint64_t offset = segment_offset(dest, pe);
  Transport& to = transport(pe, "put");
  const trace::Scope span("put", "comm");
  to.put(my_pe_, node_of(pe), offset, source, bytes, nullptr);
}

// Every transport returns from put at local completion, which put_nbi allows too.
void Pe::put_nbi(void* dest, const void* source, size_t bytes, int pe) {
  put(dest, source, bytes, pe);
}

void Pe::get(void* dest, const void* source, size_t bytes, int pe) {
  const uint64_t offset = segment_offset(source, pe);
  Transport& from = transport(pe, "get");
  const trace::Scope span("get", "comm");
  from.get(my_pe_, node_of(pe), offset, dest, bytes);
}

void Pe::atomic_add(uint64_t* dest, uint64_t value, int pe) {
  const uint64_t offset = segment_offset(dest, pe);
  transport(pe, "atomic_add").atomic_add(my_pe_, node_of(pe), offset, value);
}

uint64_t Pe::atomic_fetch_add(uint64_t* dest, uint64_t value, int pe) {
  const uint64_t offset = segment_offset(dest, pe);
  return transport(pe, "atomic_fetch_add").atomic_fetch_add(my_pe_, node_of(pe), offset, value);
}

void Pe::put_signal(void* dest, const void* source, size_t bytes, uint64_t* signal,
                    uint64_t signal_value, SignalOp op, int pe) {
  const PutPiece piece{source, bytes};
  update_signal(dest, std::span(&piece, 1), signal, signal_value, op, pe, "put_signal");
}

void Pe::put_signal(void* dest, std::span<const PutPiece> source, uint64_t* signal,
                    uint64_t signal_value, SignalOp op, int pe) {
  update_signal(dest, source, signal, signal_value, op, pe, "put_signal");
}

void Pe::signal_set(uint64_t* signal, uint64_t value, int pe) {
  update_signal(nullptr, {}, signal, value, SignalOp::kSet, pe, "signal_set");
}

void Pe::signal_add(uint64_t* signal, uint64_t value, int pe) {
  update_signal(nullptr, {}, signal, value, SignalOp::kAdd, pe, "signal_add");
}

void Pe::update_signal(void* dest, std::span<const PutPiece> source, uint64_t* signal,
                       uint64_t value, SignalOp op, int pe, const char* name) {
  const SignalUpdate update{segment_offset(signal, pe), value, op};
  const uint64_t offset = total_length(source) ? segment_offset(dest, pe) : 0;
  Transport& to = transport(pe, name);
  const trace::Scope span("put_signal", "comm");
  to.put_gather(my_pe_, node_of(pe), offset, source, &update);
}

uint64_t Pe::signal_fetch(const uint64_t* signal) const {
  return std::atomic_ref<const uint64_t>(*signal).load(std::memory_order_acquire);
}

uint64_t Pe::signal_wait_until(const uint64_t* signal, Cmp cmp, uint64_t value) {
  return signal_wait_until(signal, cmp, value, node_.wait_timeout());
}

uint64_t Pe::signal_wait_until(const uint64_t* signal, Cmp cmp, uint64_t value,
                               WaitDeadline deadline, std::string_view what, int from_pe) {
  uint64_t seen = signal_fetch(signal);
  if (compare(seen, cmp, value)) return seen;  // already there: nobody was waited for
  const BlockedOn counted(peer_waits_, from_pe);
  wait_until(
      node_.doorbell(), deadline,
      [&] {
        seen = signal_fetch(signal);
        return compare(seen, cmp, value);
      },
      [&] {
        const auto offset = reinterpret_cast<const std::byte*>(signal) - node_.segment().base;
        return "PE " + std::to_string(my_pe_) + ": " + std::string(what) +
               ": signal at segment offset " + std::to_string(offset) + " expected " +
               cmp_name(cmp) + " " + std::to_string(value) + ", saw " + std::to_string(seen);
      },
      node_.wait_policy(), from_pe);
  return seen;
}

void Pe::fence() {
  for (int node = 0; node < node_.nodes(); ++node) node_.transport_to(node).fence(my_pe_);
}

void Pe::quiet() {
  const trace::Scope span("quiet", "comm");
  for (int node = 0; node < node_.nodes(); ++node) node_.transport_to(node).quiet(my_pe_);
}

uint64_t* Pe::sync_slot(const Team& team, int slot_number) {
  return reinterpret_cast<uint64_t*>(slice_base_ + sync_slot_offset(team.index(), slot_number));
}

std::byte* Pe::team_scratch(const Team& team) {
  return slice_base_ + team_scratch_offset(team.index());
}

std::vector<uint64_t> Pe::exchange(Team& team, uint64_t value) {
  const uint64_t sequence = team.next_collective();
  const int me = team.my_index();
  uint64_t* my_value = sync_slot(team, slot::kExchangeValue + me);
  for (int i = 0; i < team.size(); ++i) {
    put_signal(my_value, &value, sizeof(value), sync_slot(team, slot::kPerSource + me), sequence,
               SignalOp::kSet, team.pe(i));
  }
  std::vector<uint64_t> values(team.size());
  const Deadline until = deadline();
  for (int i = 0; i < team.size(); ++i) {
    signal_wait_until(
        sync_slot(team, slot::kPerSource + i), Cmp::kGe, sequence, until,
        "exchange on team '" + team.name() + "' waiting for PE " + std::to_string(team.pe(i)),
        team.pe(i));
    values[i] = signal_fetch(sync_slot(team, slot::kExchangeValue + i));
  }
  // No member may overwrite a value slot before every member has read it.
  barrier(*this, team);
  return values;
}

std::shared_ptr<Team> Pe::team_split_strided(Team& parent, int start, int stride, int size,
                                             const std::string& name) {
  std::vector<int> members = strided_members(parent, start, stride, size);
  // Agree on a team index free on every member of the parent (so on every member).
  uint64_t common = ~uint64_t{0};
  for (uint64_t mask : exchange(parent, free_team_indices_)) common &= mask;
  if (common == 0) {
    throw InvalidArgument("team split: all " + std::to_string(kMaxTeams) +
                          " team indices are in use on some PE of team '" + parent.name() +
                          "'; destroy a team first");
  }
  const int index = __builtin_ctzll(common);
  uint64_t base = 0;
  for (uint64_t floor : exchange(parent, epoch_floor_)) base = std::max(base, floor);
  if (std::find(members.begin(), members.end(), my_pe_) == members.end()) return nullptr;
  free_team_indices_ &= ~(uint64_t{1} << index);
  return std::make_shared<Team>(name, index, std::move(members), my_pe_, node_.ranks_per_node(),
                                base + 1);
}

void Pe::team_destroy(const Team& team) {
  if (team.index() <= kNodesIndex) return;  // the reserved teams' indices stay reserved
  epoch_floor_ = std::max(epoch_floor_, team.high_water());
  free_team_indices_ |= uint64_t{1} << team.index();
}

std::unique_ptr<Team> Pe::team_of_nodes(uint64_t nodes) {
  const int count = node_.nodes();
  if (count > 64) {
    throw InvalidArgument(
        "leaving nodes out of a call needs a cluster of at most 64 nodes; this "
        "one has " +
        std::to_string(count));
  }
  if ((count < 64 && nodes >> count != 0) || !(nodes >> my_node() & 1)) {
    throw InvalidArgument("the nodes taking part (mask " + std::to_string(nodes) +
                          ") must be some of the cluster's " + std::to_string(count) +
                          ", this PE's node " + std::to_string(my_node()) + " among them");
  }
  std::vector<int> members;
  for (int node = 0; node < count; ++node) {
    if (!(nodes >> node & 1)) continue;
    for (int local = 0; local < node_.ranks_per_node(); ++local) {
      members.push_back(node * node_.ranks_per_node() + local);
    }
  }
  // The start: one past the highest any member used, each proposing its own to the others.
  auto clock_of = [&](int pe) {
    return reinterpret_cast<uint64_t*>(slice_base_ +
                                       sync_slot_offset(kNodesIndex, slot::kNodesClock + pe));
  };
  if (clock_read_.empty()) clock_read_.assign(size_t(n_pes()), 0);
  const uint64_t proposal = nodes_clock_ + 1;
  for (int pe : members) {
    if (pe != my_pe_) signal_set(clock_of(my_pe_), proposal, pe);
  }
  uint64_t start = proposal;
  const Deadline until = deadline();
  for (int pe : members) {
    if (pe == my_pe_) continue;
    const uint64_t read =
        signal_wait_until(clock_of(pe), Cmp::kGt, clock_read_[pe], until,
                          "a team of nodes: the counter start of PE " + std::to_string(pe), pe);
    clock_read_[pe] = read;
    start = std::max(start, read);
  }
  nodes_clock_ = start;
  return std::make_unique<Team>("nodes", kNodesIndex, std::move(members), my_pe_,
                                node_.ranks_per_node(), start * kEpochsPerTeamOfNodes);
}

}  // namespace symmesh
