// `--mode auto`: whether a fused operator's shape runs pipelined or as its sequential baseline
// (GEMM, then the collective), chosen by measuring both, as FFTW's MEASURE planner and cuDNN's
// benchmark mode do. On a machine whose cores all compute, the communication's CPU work cannot
// hide behind the GEMM and the pipeline's bookkeeping can make it the slower of the two; where a
// core or a NIC is free it wins. Only a measurement on this cluster tells which.
//
// A plan is made once per shape (operator, problem, tiles, threads, PE count) and kept for the
// table's life (the daemon's), so the calls after it all run one mode and give bitwise equal
// results. The two modes sum the partials in different orders, so their results differ in the
// last bits (both within the verified tolerance); a restarted daemon plans again and may choose
// the other one on a near tie. Pin `fused` or `sequential` for bits that never change.
#pragma once

#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ops/fused/operator.h"

namespace symmesh {

// The values are wire::MatmulMode's, whose words it takes (ops/enum_words.h).
enum class FusedMode { kFused = 1, kSequential = 2, kBoth = 3, kAuto = 4 };

// Per shape, the mode its plan chose. Thread-safe: a daemon's PEs share one table (they all store
// the same plan). At most `capacity` plans, the least recently used dropped first: a process
// naming ever new shapes cannot grow the daemon without bound, and a dropped plan only costs a
// new plan (the PEs then disagree and all plan again).
class FusedModePlans {
 public:
  explicit FusedModePlans(size_t capacity = 4096) : capacity_(capacity) {}
  std::optional<FusedMode> find(const std::string& key);
  void store(const std::string& key, FusedMode chosen);
  size_t size() const;

 private:
  using Entry = std::pair<std::string, FusedMode>;
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Entry> recent_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> plans_;
};

// What a plan depends on: every option that changes the work, and the PE count.
std::string fused_plan_key(const FusedOptions& options, const Pe& pe);

// Collective over the world team: the plan every PE holds for `key`, or nothing when one of them
// holds none or a different one (a restarted daemon, a table of its own), so they all plan again.
// `plans` null: no plan is kept.
std::optional<FusedMode> agreed_plan(Pe& pe, FusedModePlans* plans, const std::string& key);

// The plan from the runs' times (each the slowest PE's, so every PE decides alike): the pipeline
// only when its median is strictly below the baseline's, so a tie keeps the simpler path.
FusedMode faster_mode(const std::vector<double>& sequential_s, const std::vector<double>& fused_s);

// Timed runs per mode when a call plans (after a warm-up of each), and what planning costs
// against one run of one mode: every run of both, and about three times the tensors (each
// mode's own, and the warm-up output each keeps to check determinism).
inline constexpr int kPlanRuns = 3;
inline constexpr int kPlanWorkFactor = 2 * (kPlanRuns + 1);
inline constexpr int kPlanMemoryFactor = 3;

// Collective: plans `key` by running both modes on `inputs`, a warm-up and then kPlanRuns timed
// runs each, taking turns; stores the plan in `plans` (when not null) and returns the chosen
// mode's tensors, its output as every later call of the plan computes it.
FusedTensors plan_by_measuring(Pe& pe, Gemm& gemm, const FusedOptions& options, FusedTensors inputs,
                               FusedModePlans* plans, const std::string& key);

}  // namespace symmesh
