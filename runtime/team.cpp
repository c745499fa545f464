#include "runtime/team.h"

#include <algorithm>
#include <map>

#include "common/errors.h"
#include "runtime/layout.h"

namespace symmesh {

Team::Team(std::string name, int index, std::vector<int> members, int my_pe, int ranks_per_node,
           uint64_t epoch_base)
    : name_(std::move(name)),
      index_(index),
      members_(std::move(members)),
      my_pe_(my_pe),
      barrier_epoch_(epoch_base),
      collective_seq_(epoch_base),
      ring_sent_(epoch_base),
      ring_received_(epoch_base) {
  if (index_ < 0 || index_ >= kMaxTeams) {
    throw InvalidArgument("team index " + std::to_string(index_) + " outside 0.." +
                          std::to_string(kMaxTeams - 1));
  }
  if (members_.empty() || size() > kMaxTeamSize) {
    throw InvalidArgument("team '" + name_ + "' has " + std::to_string(size()) +
                          " members; allowed 1.." + std::to_string(kMaxTeamSize));
  }
  my_index_ = index_of(my_pe);
  const int my_node = my_pe / ranks_per_node;
  std::map<int, int> per_node;  // node -> members on it
  int previous_node = -1;
  for (int member : members_) {
    const int node = member / ranks_per_node;
    if (node != previous_node) {
      if (per_node.count(node))
        uniform_ = false;  // this node's members are not contiguous
      else
        leaders_.push_back(member);
      previous_node = node;
    }
    ++per_node[node];
    if (node == my_node) local_members_.push_back(member);
  }
  for (const auto& [node, count] : per_node)
    uniform_ = uniform_ && count == per_node.begin()->second;
  if (!local_members_.empty()) {
    auto it = std::find(leaders_.begin(), leaders_.end(), local_members_.front());
    leader_index_ = static_cast<int>(it - leaders_.begin());
  }
}

uint64_t Team::high_water() const {
  return std::max({barrier_epoch_, collective_seq_, ring_sent_, ring_received_});
}

int Team::index_of(int pe) const {
  auto it = std::find(members_.begin(), members_.end(), pe);
  return it == members_.end() ? -1 : static_cast<int>(it - members_.begin());
}

std::vector<int> strided_members(const Team& parent, int start, int stride, int size) {
  if (size < 1) throw InvalidArgument("team split: size " + std::to_string(size) + " must be >= 1");
  if (start < 0 || start >= parent.size()) {
    throw InvalidArgument("team split: start " + std::to_string(start) + " outside 0.." +
                          std::to_string(parent.size() - 1) + " of team '" + parent.name() + "'");
  }
  if (stride < 1) {
    throw InvalidArgument("team split: stride " + std::to_string(stride) + " must be >= 1");
  }
  const int64_t last = int64_t(start) + int64_t(stride) * (size - 1);
  if (last >= parent.size()) {
    throw InvalidArgument("team split: start " + std::to_string(start) + " + stride " +
                          std::to_string(stride) + " x (size " + std::to_string(size) +
                          " - 1) = " + std::to_string(last) + " is past the last index " +
                          std::to_string(parent.size() - 1) + " of team '" + parent.name() + "'");
  }
  std::vector<int> members;
  for (int i = 0; i < size; ++i) members.push_back(parent.pe(start + i * stride));
  return members;
}

}  // namespace symmesh
