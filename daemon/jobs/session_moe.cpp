#include "daemon/jobs/session_moe.h"

#include <cstring>

#include "api/staging_layout.h"
#include "api/tensor_overlap.h"
#include "daemon/jobs/job.h"
#include "daemon/jobs/staged_blocks.h"
#include "runtime/barrier.h"
#include "runtime/enum_words.h"

namespace symmesh {
namespace {

// What travels between the PEs: partials in the tokens' type, f16 widened to f32 (the combine
// rounds partials to bf16 or f32 only).
DType partial_dtype_for(DType tokens) {
  return tokens == DType::kBF16 ? DType::kBF16 : DType::kF32;
}

// A request's field as the options take it; validate() checks the rest of its range.
int64_t bounded(const char* name, uint64_t value, int64_t most) {
  if (value <= uint64_t(most)) return int64_t(value);
  throw InvalidArgument(std::string(name) + " = " + std::to_string(value) +
                        " is out of range: allowed up to " + std::to_string(most));
}

// Where a dispatch's `bytes` of received rows go: the heap's room when they fit in it (the
// request's dst_bytes), else `staged`.
std::byte* rows_into(std::byte* room, const attach::Request& r, uint64_t bytes, std::byte* staged) {
  return room && bytes <= r.dst_bytes ? room : staged;
}

// A dispatch's topk_idx and topk_weights from its input block at `at` in the staging area,
// checked.
Routing staged_routing(const MoeOptions& o, uint64_t at, const attach::TokenBlock& in,
                       attach::StagingArea& staging) {
  Routing routing{o.tokens, o.topk, std::vector<int32_t>(size_t(o.tokens) * o.topk),
                  std::vector<float>(size_t(o.tokens) * o.topk)};
  if (!routing.experts.empty()) {  // a PE may pass no tokens (and memcpy no null pointer)
    std::memcpy(routing.experts.data(),
                staging.range(at + in.idx, routing.experts.size() * 4, "topk_idx"),
                routing.experts.size() * 4);
    std::memcpy(routing.weights.data(),
                staging.range(at + in.weights, routing.weights.size() * 4, "topk_weights"),
                routing.weights.size() * 4);
  }
  check_routing(routing, o.experts, "topk_idx");
  return routing;
}

template <class T>
uint64_t bytes_of(const std::vector<T>& v) {
  return v.capacity() * sizeof(T);
}

// What a kept dispatch holds of the daemon's memory (its tokens and rows are the process's).
uint64_t held_by(const Routing& routing, const DispatchResult& r) {
  return bytes_of(routing.experts) + bytes_of(routing.weights) + bytes_of(r.x) +
         bytes_of(r.topk_idx) + bytes_of(r.topk_weights) + bytes_of(r.sources) +
         bytes_of(r.paths.recv_prefix) + bytes_of(r.paths.rdma_slot) +
         bytes_of(r.paths.forward_prefix) + bytes_of(r.paths.nvl_slot);
}

uint64_t held_by(const LowLatencyDispatch& d) {
  uint64_t bytes = bytes_of(d.offset) + bytes_of(d.source_pe) + bytes_of(d.source_token) +
                   bytes_of(d.terms) + bytes_of(d.sent_record) + bytes_of(d.sent) +
                   bytes_of(d.landed);
  for (const auto& terms : d.terms) bytes += bytes_of(terms);
  return bytes;  // x's storage is the buffer's, taken back at combine
}

}  // namespace

SessionMoe::SessionMoe(Pe& pe, uint64_t memory_bytes)
    : pe_(pe),
      most_held_(memory_bytes ? std::min(memory_bytes, attach::kMaxStagingBytes)
                              : attach::kMaxStagingBytes) {}

void SessionMoe::check_handle_room(int64_t tokens, int topk) const {
  const size_t handles = handles_.size() + low_latency_handles_.size();
  if (handles >= kMaxDispatchHandles) {
    throw InvalidArgument(std::to_string(handles) +
                          " dispatch handles are held: release some (allowed " +
                          std::to_string(kMaxDispatchHandles) + " at once)");
  }
  const uint64_t routing = uint64_t(tokens) * uint64_t(topk) * (sizeof(int32_t) + sizeof(float));
  if (held_ + routing > most_held_) {
    throw InvalidArgument(
        "a dispatch of " + std::to_string(tokens) + " tokens x top-" + std::to_string(topk) +
        " keeps " + std::to_string(routing) + " bytes of routing, and the " +
        std::to_string(handles) + " dispatch handles held already keep " + std::to_string(held_) +
        ": allowed up to " + std::to_string(most_held_) + " bytes for a session's handles" +
        (most_held_ < attach::kMaxStagingBytes ? " (this daemon's --job-memory over its PEs)"
                                               : "") +
        "; release handles you are done with");
  }
}

SessionMoe::Dispatched SessionMoe::dispatch(const attach::Request& r,
                                            attach::StagingArea& staging) {
  wire::check_enum(wire::DataType(r.dtype), "dtype");
  MoeOptions o;
  o.x_dtype = dtype_of(wire::DataType(r.dtype), DType::kF32);
  o.partial_dtype = partial_dtype_for(o.x_dtype);
  o.weighting = MoeWeighting::kNone;  // the process's experts weigh their outputs
  o.tokens = bounded("tokens", r.count, kMaxMoeTokens);
  o.hidden = bounded("hidden", r.args[0], kMaxMoeHidden);
  o.topk = int(bounded("topk", r.args[1], kMaxMoeTopk));
  o.experts = int(bounded("experts", r.args[2], kMaxMoeExperts));
  o.active_nodes = r.args[3];
  validate(o, pe_.node().nodes(), pe_.node().ranks_per_node());
  check_handle_room(o.tokens, o.topk);
  const size_t element = dtype_size(o.x_dtype);
  const auto in = attach::token_block(r.count, r.args[0], r.args[1], element);
  const StagedBlocks blocks(r, in.end);
  // The tokens are read where they lie while the received rows are written apart from them
  // (and the area's mapping stays put as it grows).
  const size_t x_bytes = size_t(o.tokens) * size_t(o.hidden) * element;  // unpadded, as sent
  const std::byte* x =
      input_at(r, staging, blocks.inputs() + in.x, x_bytes, element, "dispatch's x");
  std::byte* room = room_at(r, staging, x_bytes, element);
  const Routing routing = staged_routing(o, blocks.inputs(), in, staging);

  attach::TokenBlock out{};
  uint64_t out_at = 0;
  DispatchResult result = symmesh::dispatch(pe_, o, x, routing, {}, [&](int64_t received) {
    out = attach::token_block(uint64_t(received), r.args[0], r.args[1], element);
    out_at = blocks.outputs(out.end);
    staging.grow(out_at + out.end, "dispatch's received tokens");
    return rows_into(room, r, uint64_t(received) * size_t(o.hidden) * element,
                     staging.range(out_at + out.x, out.idx - out.x, "recv_x"));
  });
  const uint64_t received = uint64_t(result.received);
  // Expert ids become this PE's local expert index (DeepEP's recv_topk_idx), -1 elsewhere.
  const int32_t first_expert = pe_.my_pe() * experts_per_pe(o, pe_.n_pes());
  for (int32_t& id : result.topk_idx) id = id < 0 ? -1 : id - first_expert;
  if (received > 0) {  // else both may be null, which memcpy may not be given
    std::memcpy(staging.range(out_at + out.idx, result.topk_idx.size() * 4, "recv_topk_idx"),
                result.topk_idx.data(), result.topk_idx.size() * 4);
    std::memcpy(
        staging.range(out_at + out.weights, result.topk_weights.size() * 4, "recv_topk_weights"),
        result.topk_weights.data(), result.topk_weights.size() * 4);
  }
  result.topk_idx = {};
  result.topk_weights = {};
  const uint64_t handle = next_handle_++;
  const uint64_t bytes = held_by(routing, result);
  const uint64_t number = ++dispatches_on_[normalized(o.active_nodes)];
  handles_.emplace(handle, Kept{o, std::move(routing), std::move(result), bytes, number});
  held_ += bytes;
  return Dispatched{handle, received};
}

const SessionMoe::Kept& SessionMoe::kept(uint64_t handle) const {
  const auto it = handles_.find(handle);
  if (it == handles_.end()) {
    throw InvalidArgument("dispatch handle " + std::to_string(handle) +
                          " is not held here (it was released, or is from another session)");
  }
  return it->second;
}

std::byte* SessionMoe::placed(attach::Place place, uint64_t offset, const char* field,
                              attach::StagingArea& staging, uint64_t staged, uint64_t bytes,
                              size_t element, const char* what) {
  switch (place) {
    case attach::Place::kStaging:
      return staging.range(staged, bytes, what);
    case attach::Place::kHeap:
      if (offset % element != 0) {
        throw InvalidArgument(std::string(what) + " at heap offset " + std::to_string(offset) +
                              " is not aligned to its " + std::to_string(element) +
                              "-byte element");
      }
      return pe_.heap_range(offset, bytes);
  }
  throw InvalidArgument(std::string(what) + " is at place " + std::to_string(uint32_t(place)) +
                        ": allowed 0 (the staging area) or 1 (the symmetric heap at " + field +
                        ")");
}

const std::byte* SessionMoe::input_at(const attach::Request& r, attach::StagingArea& staging,
                                      uint64_t staged, uint64_t bytes, size_t element,
                                      const char* what) {
  return placed(r.input_place, r.src, "src", staging, staged, bytes, element, what);
}

std::byte* SessionMoe::room_at(const attach::Request& r, attach::StagingArea& staging,
                               uint64_t x_bytes, size_t element) {
  if (r.output_place == attach::Place::kStaging) return nullptr;
  std::byte* room =
      placed(r.output_place, r.dst, "dst", staging, 0, r.dst_bytes, element, "dispatch's recv_x");
  attach::check_apart(r, x_bytes, r.dst_bytes, "dispatch", "x", "recv_x");
  return room;
}

std::byte* SessionMoe::output_at(const attach::Request& r, attach::StagingArea& staging,
                                 uint64_t staged, uint64_t bytes, uint64_t rows_bytes,
                                 size_t element) {
  // The process grew the area for the inputs; the outputs' block may lie past them.
  if (r.output_place == attach::Place::kStaging) staging.grow(staged + bytes, "combine's output");
  std::byte* out =
      placed(r.output_place, r.dst, "dst", staging, staged, bytes, element, "combine's output");
  attach::check_apart(r, rows_bytes, bytes, "combine", "expert rows", "output");
  return out;
}

void SessionMoe::combine(const attach::Request& r, attach::StagingArea& staging) {
  const Kept& k = kept(r.args[0]);
  // The dispatch's paths, for rows of any width and type: the tokens' own, or their gradients'.
  wire::check_enum(wire::DataType(r.dtype), "dtype");
  MoeOptions o = k.options;
  o.x_dtype = dtype_of(wire::DataType(r.dtype), DType::kF32);
  o.partial_dtype = partial_dtype_for(o.x_dtype);
  o.hidden = bounded("hidden", r.args[2], kMaxMoeHidden);
  validate(o, pe_.node().nodes(), pe_.node().ranks_per_node());
  if (r.count != uint64_t(k.result.received)) {
    throw InvalidArgument("combine of dispatch " + std::to_string(r.args[0]) + " got " +
                          std::to_string(r.count) + " rows; its dispatch delivered " +
                          std::to_string(k.result.received) + " tokens");
  }
  const size_t row = size_t(o.hidden) * dtype_size(o.x_dtype);
  const bool bias = r.args[1] != 0;
  const auto block = attach::combine_block(r.count, uint64_t(k.routing.tokens), uint64_t(o.hidden),
                                           bias, dtype_size(o.x_dtype));
  const StagedBlocks blocks(r, block.end);
  CombineInputs inputs;
  inputs.expert_rows = input_at(r, staging, blocks.inputs() + block.rows, r.count * row,
                                dtype_size(o.x_dtype), "combine's expert rows");
  if (bias) {
    inputs.biases.push_back(
        staging.range(blocks.inputs() + block.bias, k.routing.tokens * row, "combine's bias"));
  }
  const uint64_t out_bytes = k.routing.tokens * row;
  inputs.out = output_at(r, staging, blocks.outputs(out_bytes), out_bytes, r.count * row,
                         dtype_size(o.x_dtype));
  symmesh::combine(pe_, o, k.result, k.routing, inputs);
}

LowLatencyBuffer& SessionMoe::low_latency_buffer(const LowLatencyShape& shape) {
  if (low_latency_ && low_latency_->shape() == shape) return *low_latency_;
  check_low_latency_shape(shape, pe_.n_pes());
  if (low_latency_) {
    for (auto& [id, kept] : low_latency_handles_) {
      if (kept.buffer == low_latency_buffers_ && low_latency_->live(kept.dispatch)) {
        throw InvalidArgument("a low-latency dispatch of another shape while dispatch " +
                              std::to_string(id) + " is not combined: combine it first");
      }
    }
    barrier_all(pe_);  // no node peer still reads this PE's dispatch records
    low_latency_.reset();
  }
  low_latency_ = std::make_unique<LowLatencyBuffer>(pe_, shape);
  ++low_latency_buffers_;
  return *low_latency_;
}

SessionMoe::Dispatched SessionMoe::low_latency_dispatch(const attach::Request& r,
                                                        attach::StagingArea& staging) {
  wire::check_enum(wire::DataType(r.dtype), "dtype");
  MoeOptions o;
  o.x_dtype = dtype_of(wire::DataType(r.dtype), DType::kF32);
  o.tokens = bounded("tokens", r.count, kMaxLowLatencyTokens);
  o.hidden = bounded("hidden", r.args[0], kMaxMoeHidden);
  o.topk = int(bounded("topk", r.args[1], kMaxMoeTopk));
  o.experts = int(bounded("experts", r.args[2], kMaxMoeExperts));
  const int64_t max_tokens = bounded("max_tokens", r.args[3], kMaxLowLatencyTokens);
  check_handle_room(o.tokens, o.topk);
  // This PE's own inputs are checked before the buffer, which may be made collectively.
  const size_t element = dtype_size(o.x_dtype);
  const auto in = attach::token_block(r.count, r.args[0], r.args[1], element);
  const StagedBlocks blocks(r, in.end);
  const size_t x_bytes = size_t(o.tokens) * size_t(o.hidden) * element;
  const std::byte* x =
      input_at(r, staging, blocks.inputs() + in.x, x_bytes, element, "dispatch's x");
  const Routing routing = staged_routing(o, blocks.inputs(), in, staging);
  // The received rows straight onto the heap's room or into the staging area's outputs block.
  std::byte* room = room_at(r, staging, x_bytes, element);
  LowLatencyBuffer& buffer = low_latency_buffer({.max_tokens = max_tokens,
                                                 .hidden = o.hidden,
                                                 .topk = o.topk,
                                                 .experts = o.experts,
                                                 .dtype = o.x_dtype});
  const int local = buffer.local_experts();
  attach::LowLatencyBlock out;
  uint64_t out_at = 0;
  LowLatencyDispatch d = buffer.dispatch(x, routing, [&](int64_t received) {
    out = attach::low_latency_block(uint64_t(received), r.args[0], uint64_t(local), element);
    out_at = blocks.outputs(out.end);
    staging.grow(out_at + out.end, "low-latency dispatch's received tokens");
    return rows_into(room, r, uint64_t(received) * size_t(o.hidden) * element,
                     staging.range(out_at + out.x, out.counts - out.x, "recv_x"));
  });
  auto* counts =
      reinterpret_cast<int64_t*>(staging.range(out_at + out.counts, size_t(local) * 8, "counts"));
  for (int e = 0; e < local; ++e) counts[e] = d.count(e);
  const uint64_t handle = next_handle_++;
  const uint64_t received = uint64_t(d.received());
  const uint64_t bytes = held_by(d);
  low_latency_handles_.emplace(
      handle, LowLatencyKept{std::move(d), low_latency_buffers_, bytes, ++dispatches_on_[0]});
  held_ += bytes;
  return Dispatched{handle, received};
}

void SessionMoe::low_latency_combine(const attach::Request& r, attach::StagingArea& staging) {
  const auto it = low_latency_handles_.find(r.args[0]);
  if (it == low_latency_handles_.end()) {
    throw InvalidArgument("low-latency dispatch handle " + std::to_string(r.args[0]) +
                          " is not held here (it was released, is a normal dispatch's, or is "
                          "from another session)");
  }
  if (it->second.buffer != low_latency_buffers_) {
    throw InvalidArgument("low-latency dispatch " + std::to_string(r.args[0]) +
                          " went through an earlier buffer (the shape changed since): dispatch "
                          "again");
  }
  LowLatencyDispatch& d = it->second.dispatch;
  if (r.count != uint64_t(d.received())) {
    throw InvalidArgument("low-latency combine of dispatch " + std::to_string(r.args[0]) + " got " +
                          std::to_string(r.count) + " rows; its dispatch delivered " +
                          std::to_string(d.received()) + " tokens");
  }
  const LowLatencyShape& shape = low_latency_->shape();
  wire::check_enum(wire::DataType(r.dtype), "dtype");
  if (dtype_of(wire::DataType(r.dtype), DType::kF32) != shape.dtype) {
    throw InvalidArgument(std::string("low-latency combine rows in ") +
                          wire::word(dtype_of(wire::DataType(r.dtype), DType::kF32)) +
                          ": allowed the dispatch's type, " + wire::word(shape.dtype));
  }
  const size_t element = dtype_size(shape.dtype), row = size_t(shape.hidden) * element;
  const uint64_t tokens = d.sent_record.size() / size_t(pe_.node().nodes());
  const auto block = attach::combine_block(r.count, tokens, uint64_t(shape.hidden), false, element);
  const StagedBlocks blocks(r, block.end);
  const std::byte* rows = input_at(r, staging, blocks.inputs() + block.rows, r.count * row, element,
                                   "combine's expert rows");
  low_latency_->combine(
      d, rows,
      output_at(r, staging, blocks.outputs(tokens * row), tokens * row, r.count * row, element));
}

uint64_t SessionMoe::normalized(uint64_t active_nodes) const {
  return active_nodes == every_node(pe_.node().nodes()) ? 0 : active_nodes;
}

uint64_t SessionMoe::agree_on(attach::Request& agreed) const {
  switch (agreed.op) {
    case attach::Op::kDispatch:
      agreed.args[3] = normalized(agreed.args[3]);
      return agreed.args[3];
    case attach::Op::kCombine:
      if (const auto it = handles_.find(agreed.args[0]); it != handles_.end()) {
        agreed.args[0] = it->second.number;
        return normalized(it->second.options.active_nodes);
      }
      break;
    case attach::Op::kLowLatencyCombine:
      if (const auto it = low_latency_handles_.find(agreed.args[0]);
          it != low_latency_handles_.end()) {
        agreed.args[0] = it->second.number;
      }
      break;
    default:
      break;
  }
  return 0;  // an unknown handle stays as it is: the call refuses it
}

void SessionMoe::release(uint64_t handle) {
  if (const auto it = low_latency_handles_.find(handle); it != low_latency_handles_.end()) {
    if (it->second.buffer == low_latency_buffers_) low_latency_->release(it->second.dispatch);
    held_ -= it->second.bytes;
    low_latency_handles_.erase(it);
    return;
  }
  held_ -= kept(handle).bytes;
  handles_.erase(handle);
}

}  // namespace symmesh
