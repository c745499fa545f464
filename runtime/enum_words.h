// The runtime's enums as mirrors of the wire's (wire/enum_mirror.h): each value is its wire
// enum's number, so wire::word, wire::parse_word and wire::from_wire read and write them from
// the .proto file's one list.
#pragma once

#include "runtime/barrier_options.h"
#include "runtime/collectives.h"
#include "runtime/collectives/dtype.h"
#include "wire/enum_mirror.h"
#include "wire/jobs.pb.h"

namespace symmesh::wire {

template <>
struct MirrorOf<DType> {
  using type = DataType;
  static constexpr int kFirst = DATA_TYPE_F32, kLast = DATA_TYPE_F16;
};
static_assert(int(DType::kF32) == DATA_TYPE_F32 && int(DType::kBF16) == DATA_TYPE_BF16 &&
              int(DType::kF16) == DATA_TYPE_F16);

template <>
struct MirrorOf<ReduceOp> {
  using type = Reduction;
  static constexpr int kFirst = REDUCTION_SUM, kLast = REDUCTION_MIN;
};
static_assert(int(ReduceOp::kSum) == REDUCTION_SUM && int(ReduceOp::kMax) == REDUCTION_MAX &&
              int(ReduceOp::kMin) == REDUCTION_MIN);

template <>
struct MirrorOf<symmesh::BarrierAlgo> {
  using type = wire::BarrierAlgo;
  static constexpr int kFirst = BARRIER_ALGO_DISSEMINATION, kLast = BARRIER_ALGO_AUTO;
};
static_assert(int(symmesh::BarrierAlgo::kDissemination) == BARRIER_ALGO_DISSEMINATION &&
              int(symmesh::BarrierAlgo::kKary) == BARRIER_ALGO_KARY &&
              int(symmesh::BarrierAlgo::kPull) == BARRIER_ALGO_PULL &&
              int(symmesh::BarrierAlgo::kAuto) == BARRIER_ALGO_AUTO);

// ring and hier: a job's auto is resolved before it reaches the runtime, and direct is
// all-to-all's only algorithm, which takes none.
template <>
struct MirrorOf<CollAlgo> {
  using type = CollectiveAlgo;
  static constexpr int kFirst = COLLECTIVE_ALGO_RING, kLast = COLLECTIVE_ALGO_HIER;
};
static_assert(int(CollAlgo::kRing) == COLLECTIVE_ALGO_RING &&
              int(CollAlgo::kHier) == COLLECTIVE_ALGO_HIER);

}  // namespace symmesh::wire
