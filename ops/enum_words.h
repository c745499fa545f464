// The operators' enums as mirrors of the wire's (wire/enum_mirror.h): each value is its wire
// enum's number, so wire::word, wire::parse_word and wire::from_wire read and write them from
// the .proto file's one list.
#pragma once

#include "ops/fused/mode_plans.h"
#include "ops/fused/options.h"
#include "ops/moe/options.h"
#include "runtime/enum_words.h"

namespace symmesh::wire {

template <>
struct MirrorOf<FusedOp> {
  using type = MatmulOp;
  static constexpr int kFirst = MATMUL_OP_MATMUL_REDUCE_SCATTER, kLast = MATMUL_OP_ALLGATHER_MATMUL;
};
static_assert(int(FusedOp::kMatmulReduceScatter) == MATMUL_OP_MATMUL_REDUCE_SCATTER &&
              int(FusedOp::kGemmAllreduce) == MATMUL_OP_GEMM_ALLREDUCE &&
              int(FusedOp::kAllgatherMatmul) == MATMUL_OP_ALLGATHER_MATMUL);

template <>
struct MirrorOf<FusedMode> {
  using type = MatmulMode;
  static constexpr int kFirst = MATMUL_MODE_FUSED, kLast = MATMUL_MODE_AUTO;
};
static_assert(int(FusedMode::kFused) == MATMUL_MODE_FUSED &&
              int(FusedMode::kSequential) == MATMUL_MODE_SEQUENTIAL &&
              int(FusedMode::kBoth) == MATMUL_MODE_BOTH &&
              int(FusedMode::kAuto) == MATMUL_MODE_AUTO);

template <>
struct MirrorOf<symmesh::StageTransfer> {
  using type = wire::StageTransfer;
  static constexpr int kFirst = STAGE_TRANSFER_PULL, kLast = STAGE_TRANSFER_PUSH;
};
static_assert(int(symmesh::StageTransfer::kPull) == STAGE_TRANSFER_PULL &&
              int(symmesh::StageTransfer::kPush) == STAGE_TRANSFER_PUSH);

template <>
struct MirrorOf<symmesh::MoeWeighting> {
  using type = wire::MoeWeighting;
  static constexpr int kFirst = MOE_WEIGHTING_NONE, kLast = MOE_WEIGHTING_TOPK;
};
static_assert(int(symmesh::MoeWeighting::kNone) == MOE_WEIGHTING_NONE &&
              int(symmesh::MoeWeighting::kTopk) == MOE_WEIGHTING_TOPK);

template <>
struct MirrorOf<symmesh::MoeAlgo> {
  using type = wire::MoeAlgo;
  static constexpr int kFirst = MOE_ALGO_HIER, kLast = MOE_ALGO_LOW_LATENCY;
};
static_assert(int(symmesh::MoeAlgo::kHier) == MOE_ALGO_HIER &&
              int(symmesh::MoeAlgo::kFlat) == MOE_ALGO_FLAT &&
              int(symmesh::MoeAlgo::kLowLatency) == MOE_ALGO_LOW_LATENCY);

}  // namespace symmesh::wire
