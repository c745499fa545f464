// Which inter-node barrier algorithm a barrier runs (the SHMEM barrier design's V1, V2, V3).
#pragma once

namespace symmesh {

enum class BarrierAlgo {
  kDissemination,  // V1: ceil(log2 n) rounds, one signal each
  kKary,           // V2: ceil(log_k n) rounds, up to k-1 signals each
  kPull,           // V3: each leader publishes its own counter and reads the others'
};

struct BarrierOptions {
  BarrierAlgo algo = BarrierAlgo::kPull;
  int k = 8;  // radix of kKary, 2..16
};

}  // namespace symmesh
