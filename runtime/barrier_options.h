// Which inter-node barrier algorithm a barrier runs (the SHMEM barrier design's V1, V2, V3, and
// the choice made from the team's shape).
#pragma once

namespace symmesh {

enum class BarrierAlgo {
  kDissemination,  // V1: ceil(log2 n) rounds, one signal each
  kKary,           // V2: ceil(log_k n) rounds, up to k-1 signals each
  kPull,           // V3: each leader publishes its own counter and reads the others'
  kAuto,  // one round of n-1 pushed signals per leader (k-ary with k = n) up to 16 leaders,
          // dissemination beyond
};

struct BarrierOptions {
  BarrierAlgo algo = BarrierAlgo::kAuto;
  int k = 8;  // radix of kKary, 2..16
};

}  // namespace symmesh
