#include "ops/gemm.h"

#include "common/errors.h"
#include "runtime/enum_words.h"

namespace symmesh {
namespace {

using dt = dnnl::memory::data_type;

dt onednn_type(DType type) {
  switch (type) {
    case DType::kBF16:
      return dt::bf16;
    case DType::kF16:
      return dt::f16;
    default:
      return dt::f32;
  }
}

dnnl::memory::desc strided(int64_t rows, int64_t cols, int64_t ld, dt type) {
  return dnnl::memory::desc({rows, cols}, type, dnnl::memory::dims{ld, 1});
}

void check(const GemmShape& s) {
  auto field = [](const char* name, int64_t value, int64_t low, const char* what) {
    if (value < low) {
      throw InvalidArgument(std::string("gemm: ") + name + " = " + std::to_string(value) +
                            " must be at least " + std::to_string(low) + " (" + what + ")");
    }
  };
  field("m", s.m, 1, "rows of A and C");
  field("n", s.n, 1, "columns of B and C");
  field("k", s.k, 1, "columns of A, rows of B");
  field("lda", s.lda, s.k, "k");
  field("ldb", s.ldb, s.n, "n");
  field("ldc", s.ldc, s.n, "n");
}

}  // namespace

Gemm::Gemm(size_t capacity) : engine_(dnnl::engine::kind::cpu, 0), capacity_(capacity) {
  if (capacity_ == 0) throw InvalidArgument("gemm: a primitive cache of 0 entries (at least 1)");
}

std::shared_ptr<const Gemm::Cached> Gemm::primitive(const GemmShape& s, DType type,
                                                    bool accumulate) {
  const Key key{s.m, s.n, s.k, s.lda, s.ldb, s.ldc, int(type), accumulate};
  std::lock_guard lock(mutex_);
  if (auto it = cache_.find(key); it != cache_.end()) {
    uses_.splice(uses_.begin(), uses_, it->second.use);
    return it->second.cached;
  }
  dnnl::primitive_attr attr;
  // The library's default scratchpad is global: threads running one primitive at once would
  // share it. Each call brings its own.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  auto describe = [&](dt in) {  // the oneDNN 2.x form: an op descriptor, then its primitive
    const dnnl::matmul::desc op(strided(s.m, s.k, s.lda, in), strided(s.k, s.n, s.ldb, in),
                                strided(s.m, s.n, s.ldc, dt::f32));
    return dnnl::matmul::primitive_desc(op, attr, engine_);
  };

  auto cached = std::make_shared<Cached>();
  dnnl::matmul::primitive_desc pd;
  try {
    pd = describe(onednn_type(type));
  } catch (const dnnl::error&) {
    if (type == DType::kF32) throw;
    // No kernel for this 16-bit type on this CPU (f16 here; bf16 without AVX-512): the
    // operands are converted, the product is f32.
    pd = describe(dt::f32);
    cached->convert_to_f32 = true;
  }
  cached->primitive = dnnl::matmul(pd);
  cached->scratchpad = pd.scratchpad_desc();
  ++created_;
  std::string& paths = paths_[int(type)];
  const std::string kernel =
      (cached->convert_to_f32 ? "converted to f32, then " : "") + std::string(pd.impl_info_str());
  if (paths.find(kernel) == std::string::npos) paths += (paths.empty() ? "" : ", ") + kernel;
  if (cache_.size() == capacity_) {
    cache_.erase(uses_.back());
    uses_.pop_back();
  }
  uses_.push_front(key);
  cache_.emplace(key, Entry{cached, uses_.begin()});
  return cached;
}

void Gemm::multiply(const GemmShape& s, DType type, const void* a, const void* b, float* c,
                    bool accumulate) {
  check(s);
  const std::shared_ptr<const Cached> held = primitive(s, type, accumulate);
  const Cached& cached = *held;
  const dt in = cached.convert_to_f32 ? dt::f32 : onednn_type(type);
  std::vector<float> a32, b32;
  if (cached.convert_to_f32) {  // strided views convert row by row
    a32.resize(size_t(s.m) * s.lda);
    b32.resize(size_t(s.k) * s.ldb);
    for (int64_t r = 0; r < s.m; ++r) {
      load_f32(a32.data() + r * s.lda, static_cast<const uint16_t*>(a) + r * s.lda, s.k, type);
    }
    for (int64_t r = 0; r < s.k; ++r) {
      load_f32(b32.data() + r * s.ldb, static_cast<const uint16_t*>(b) + r * s.ldb, s.n, type);
    }
    a = a32.data();
    b = b32.data();
  }
  dnnl::memory a_mem(strided(s.m, s.k, s.lda, in), engine_, const_cast<void*>(a));
  dnnl::memory b_mem(strided(s.k, s.n, s.ldb, in), engine_, const_cast<void*>(b));
  dnnl::memory c_mem(strided(s.m, s.n, s.ldc, dt::f32), engine_, c);
  thread_local std::vector<std::byte> scratch;
  scratch.resize(std::max<size_t>(scratch.size(), cached.scratchpad.get_size()));
  dnnl::memory scratch_mem(cached.scratchpad, engine_, scratch.data());
  dnnl::stream stream(engine_);  // one per call: compute threads multiply concurrently
  cached.primitive.execute(stream, {{DNNL_ARG_SRC, a_mem},
                                    {DNNL_ARG_WEIGHTS, b_mem},
                                    {DNNL_ARG_DST, c_mem},
                                    {DNNL_ARG_SCRATCHPAD, scratch_mem}});
  stream.wait();
}

std::string Gemm::path(DType type) const {
  std::lock_guard lock(mutex_);
  auto it = paths_.find(int(type));
  return wire::word(type) + ": " + (it == paths_.end() ? "not run yet" : it->second);
}

size_t Gemm::primitives_created() const {
  std::lock_guard lock(mutex_);
  return created_;
}

size_t Gemm::primitives_cached() const {
  std::lock_guard lock(mutex_);
  return cache_.size();
}

}  // namespace symmesh
