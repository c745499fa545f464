// Which inter-node barrier algorithm a barrier runs (the SHMEM barrier design's V1, V2, V3, and
// the choice made from the team's shape).
#pragma once

namespace symmesh {

// The values are wire::BarrierAlgo's, whose words it takes (runtime/enum_words.h).
enum class BarrierAlgo {
  kDissemination = 1,  // V1: ceil(log2 n) rounds, one signal each
  kKary = 2,           // V2: ceil(log_k n) rounds, up to k-1 signals each
  kPull = 3,           // V3: each leader publishes its own counter and reads the others'
  kAuto = 4,  // one round of n-1 pushed signals per leader (k-ary with k = n) up to 16 leaders,
              // dissemination beyond
};

struct BarrierOptions {
  BarrierAlgo algo = BarrierAlgo::kAuto;
  int k = 8;  // radix of kKary, 2..16
};

}  // namespace symmesh
