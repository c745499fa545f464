#include "ops/fused/mode_plans.h"

#include "ops/enum_words.h"
#include "ops/fused/mode_run.h"
#include "ops/pe_stats.h"
#include "runtime/barrier.h"

namespace symmesh {

std::optional<FusedMode> FusedModePlans::find(const std::string& key) {
  std::lock_guard lock(mutex_);
  const auto it = plans_.find(key);
  if (it == plans_.end()) return std::nullopt;
  recent_.splice(recent_.begin(), recent_, it->second);
  return it->second->second;
}

void FusedModePlans::store(const std::string& key, FusedMode chosen) {
  std::lock_guard lock(mutex_);
  if (const auto it = plans_.find(key); it != plans_.end()) {
    it->second->second = chosen;
    recent_.splice(recent_.begin(), recent_, it->second);
    return;
  }
  recent_.emplace_front(key, chosen);
  plans_[key] = recent_.begin();
  if (plans_.size() > capacity_) {
    plans_.erase(recent_.back().first);
    recent_.pop_back();
  }
}

size_t FusedModePlans::size() const {
  std::lock_guard lock(mutex_);
  return plans_.size();
}

std::string fused_plan_key(const FusedOptions& o, const Pe& pe) {
  std::string key = wire::word(o.op) + " " + wire::word(o.dtype);
  // The subtile rows that run (0 and anything past a tile are a whole tile); only
  // gemm-allreduce has subtiles.
  const int64_t subtile_m = o.op == FusedOp::kGemmAllreduce ? gemm_allreduce_subtile_m(o) : 0;
  for (const int64_t value :
       {o.m, o.n, o.k, o.tile_m, o.tile_n, o.tile_k, int64_t(o.stages), int64_t(o.comm_interval),
        subtile_m, int64_t(o.compute_threads), int64_t(o.comm_threads),
        int64_t(o.transfer == StageTransfer::kPush), int64_t(pe.n_pes())}) {
    key += " " + std::to_string(value);
  }
  return key;
}

std::optional<FusedMode> agreed_plan(Pe& pe, FusedModePlans* plans, const std::string& key) {
  // 0: no plan; 1 + the mode otherwise.
  const std::optional<FusedMode> mine = plans ? plans->find(key) : std::nullopt;
  const uint64_t code = mine ? 1 + uint64_t(*mine) : 0;
  for (const uint64_t theirs : pe.exchange(pe.team_world(), code)) {
    if (theirs != code) return std::nullopt;
  }
  return mine;
}

FusedMode faster_mode(const std::vector<double>& sequential_s, const std::vector<double>& fused_s) {
  return median(fused_s) < median(sequential_s) ? FusedMode::kFused : FusedMode::kSequential;
}

FusedTensors plan_by_measuring(Pe& pe, Gemm& gemm, const FusedOptions& o, FusedTensors inputs,
                               FusedModePlans* plans, const std::string& key) {
  ModeRun sequential("sequential plan run", make_sequential(pe, gemm, o), o, pe, inputs);
  ModeRun fused("fused plan run", make_fused(pe, gemm, o), o, pe, std::move(inputs));
  for (int i = 0; i < kPlanRuns; ++i) {
    sequential.measure(pe);
    fused.measure(pe);
  }
  const FusedMode chosen = faster_mode(sequential.total, fused.total);
  if (plans) plans->store(key, chosen);
  barrier_all(pe);  // nobody frees a workspace while a peer may still read from it
  return std::move(chosen == FusedMode::kFused ? fused.tensors : sequential.tensors);
}

}  // namespace symmesh
