// GEMM through oneDNN for the fused operators: C (f32, row-major) = A x B, or
// C += A x B, with A and B in f32, bf16 or f16 and f32 accumulation. Operands are strided
// views (a tile of a larger matrix is a pointer and a leading dimension), so one call is one
// tile. One oneDNN primitive per (shape, strides, type, accumulate) is created on first use
// and cached: tiles of one shape never create a second. The cache holds at most `capacity`
// primitives and drops the least recently used beyond that, so a daemon that serves jobs of
// ever new shapes does not grow without bound (a primitive holds its JIT code). Thread-safe:
// compute threads share one; a dropped primitive lives until the calls running it return.
//
// Paths: f32 runs oneDNN's f32 kernels; bf16 and f16 run natively where oneDNN has a kernel
// for them on this CPU (bf16: brgemm with avx512_bf16 here), otherwise A and B are converted
// to f32 first (f16 here; bf16 on CPUs without AVX-512). path() says which ran.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/collectives/dtype.h"

namespace symmesh {

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;  // leading dimensions (row strides), in elements
};

class Gemm {
 public:
  static constexpr size_t kDefaultCapacity = 256;
  explicit Gemm(size_t capacity = kDefaultCapacity);

  // Throws InvalidArgument naming the field (m, n, k >= 1; lda >= k, ldb >= n, ldc >= n).
  void multiply(const GemmShape& shape, DType type, const void* a, const void* b, float* c,
                bool accumulate);
  // The kernels that ran for `type`: "bf16: brg:avx512_core_bf16, gemm:jit",
  // "f16: converted to f32, then brg:avx512_core", ...
  std::string path(DType type) const;
  size_t primitives_created() const;  // since construction, dropped ones included
  size_t primitives_cached() const;

 private:
  struct Cached {
    dnnl::matmul primitive;
    dnnl::memory::desc scratchpad;
    bool convert_to_f32 = false;  // f16 without a kernel for it here
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int, bool>;
  std::shared_ptr<const Cached> primitive(const GemmShape& shape, DType type, bool accumulate);

  dnnl::engine engine_;
  const size_t capacity_;
  mutable std::mutex mutex_;
  struct Entry {
    std::shared_ptr<const Cached> cached;
    std::list<Key>::iterator use;  // its place in uses_
  };
  std::map<Key, Entry> cache_;
  std::list<Key> uses_;  // most recently used first
  size_t created_ = 0;
  std::map<int, std::string> paths_;  // per type: the kernels its primitives chose
};

}  // namespace symmesh
