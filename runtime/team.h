// A team: an ordered set of PEs (the SHMEM barrier design: start, stride, size over a parent), with
// its own sync pool and scratch (by team index) and its own epoch counters. Each PE holds its own
// Team object; members agree on everything in it because they build it the same way.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace symmesh {

class Team {
 public:
  // `members` are global PE ids in team order; `ranks_per_node` places them on nodes.
  // Every counter starts at `epoch_base`, above anything an earlier team with the same
  // index left in the slots, so a reused index never passes a wait early.
  Team(std::string name, int index, std::vector<int> members, int my_pe, int ranks_per_node,
       uint64_t epoch_base = 0);

  const std::string& name() const { return name_; }
  int index() const { return index_; }
  int size() const { return static_cast<int>(members_.size()); }
  int my_index() const { return my_index_; }
  int pe(int team_index) const { return members_.at(team_index); }
  const std::vector<int>& members() const { return members_; }
  int index_of(int pe) const;

  // Hierarchy: the members on my node (team order), and the first member of each node.
  const std::vector<int>& local_members() const { return local_members_; }
  const std::vector<int>& leaders() const { return leaders_; }
  bool is_leader() const { return !local_members_.empty() && local_members_[0] == my_pe_; }
  int leader_index() const { return leader_index_; }  // my node's place among the leaders
  // True when every node holds the same number of members and each node's members are
  // contiguous in team order (what the hierarchical collectives need).
  bool uniform() const { return uniform_; }

  uint64_t next_barrier_epoch() { return ++barrier_epoch_; }
  uint64_t next_collective() { return ++collective_seq_; }
  uint64_t& ring_sent() { return ring_sent_; }
  uint64_t& ring_received() { return ring_received_; }
  // The number of the last collective that was a one-shot all-reduce; 0 while there was none,
  // or once a ring has used the scratch since (collective numbers start at 1).
  uint64_t last_one_shot() const { return last_one_shot_; }
  void set_last_one_shot(uint64_t sequence) { last_one_shot_ = sequence; }
  // The largest value this team's counters have reached.
  uint64_t high_water() const;

  // Teams derived for the hierarchical collectives (created on first use, then cached).
  std::shared_ptr<Team> node_part;
  std::shared_ptr<Team> cross_part;

 private:
  std::string name_;
  int index_;
  std::vector<int> members_;
  int my_pe_;
  int my_index_ = -1;
  std::vector<int> local_members_;
  std::vector<int> leaders_;
  int leader_index_ = -1;
  bool uniform_ = true;
  uint64_t barrier_epoch_ = 0;
  uint64_t collective_seq_ = 0;
  uint64_t ring_sent_ = 0;      // chunks this PE put into its ring successor's scratch
  uint64_t ring_received_ = 0;  // chunks this PE consumed from its own scratch
  uint64_t last_one_shot_ = 0;
};

// The members of the strided split of `parent`: parent indices start, start + stride, ...
// Throws InvalidArgument naming the field when the split does not fit the parent.
std::vector<int> strided_members(const Team& parent, int start, int stride, int size);

}  // namespace symmesh
