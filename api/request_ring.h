// One attached PE's calls into its daemon, through a page of shared memory both processes map
// (a memfd the daemon passes at attach) rather than a socket round trip: a single-producer,
// single-consumer ring of kRingSlots requests. The process writes the request of slot
// `submitted % kRingSlots` and bumps `submitted`; the daemon's PE thread serves requests in
// order, writes each one's completion into its slot and bumps `completed`. Each side waits
// for the other's counter to move: a short spin, then sleep on it with a shared futex.
//
// The daemon reads each request once into its own memory and checks it (op, element type,
// offsets inside the PE's heap) before acting: the ring is the process's to scribble on.
//
// The same memfd holds, after the ring, the PE's staging area: memory private to the PE and its
// process (not symmetric) through which the calls whose sizes differ between PEs pass their
// tensors (dispatch, combine, the fused ops). It grows on demand: the daemon enlarges the memfd
// and maps the new part, and every completion carries the size, which the process maps in turn
// (api/staging_area.h: neither mapping ever moves).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace symmesh::attach {

// Version of AttachRequest/AttachReply and of this layout; both sides must agree.
inline constexpr uint32_t kAttachProtocolVersion = 11;  // 11: kDispatch's active nodes
// AttachRequest and AttachReply are read with this cap on either side.
inline constexpr uint32_t kAttachFrameCap = 4096;
inline constexpr uint32_t kRingMagic = 0x53594d52;  // "SYMR"
inline constexpr uint32_t kRingSlots = 16;
inline constexpr size_t kMessageBytes = 512;

enum class Op : uint32_t {
  kNone = 0,
  kEmpty = 1,    // does nothing: the round trip itself
  kBarrier = 2,  // world barrier
  kMalloc = 3,   // symmetric: `count` bytes; answers the offset in `value`
  kFree = 4,     // the allocation at `dst`
  kAllReduce = 5,
  kReduceScatter = 6,
  kAllGather = 7,
  kAllToAll = 8,
  kDetach = 9,  // the process is done with its PE
  // Staging: the area holds at least `count` bytes after the call.
  kStage = 10,
  // MoE dispatch (api/staging_layout.h for where each tensor sits in the staging area; x may
  // lie on the heap instead: `input_place`, and recv_x go onto it when it fits in `dst_bytes`:
  // `output_place`). count: tokens; args: hidden, topk, experts, and the nodes taking part (a
  // bit per node; 0: all), which the combine of its handle keeps. Answers the handle in `value`
  // and the tokens received in `value2`.
  kDispatch = 11,
  // MoE combine along the dispatch args[0]; count: the received tokens; args[1]: 1 with a
  // bias; args[2]: the rows' width (hidden). The expert rows may lie on the heap
  // (`input_place`), and the combined tokens may go onto it (`output_place`).
  kCombine = 12,
  kReleaseHandle = 13,  // args[0]: a dispatch's handle
  // The fused ops: args m, n, k (a: m x k, b: k x n, this PE's; see api/staging_layout.h) and
  // the mode (a wire::MatmulMode; 0: fused).
  kGemmAllReduce = 14,
  kMatmulReduceScatter = 15,
  kAllGatherMatmul = 16,
  // MoE low-latency dispatch (the decoding mode; api/staging_layout.h, or x and recv_x on the
  // heap as for kDispatch): count: tokens; args: hidden, topk, experts, max_tokens (the buffer's:
  // every PE passes the same). Answers the handle in `value` and the tokens received in `value2`.
  kLowLatencyDispatch = 17,
  // MoE low-latency combine of the dispatch args[0]; count: the received tokens; dtype: the
  // dispatch's. The rows and the combined tokens may lie on the heap, as for kCombine.
  kLowLatencyCombine = 18,
  // One-sided, between this PE's heap and PE args[0]'s (symmetric offsets), for messages
  // between processes: neither waits for the other PE's process, only for the wire.
  // kGet: `count` bytes from `src` on PE args[0] into `dst` here; then, when args[1] is not 0,
  // the 8-byte word at args[1] on PE args[0] is set to args[2] (the sender learns its bytes
  // were taken).
  kGet = 19,
  // kPutSignal: `count` bytes from `src` here to `dst` on PE args[0], then the 8-byte word at
  // args[1] there is set to args[2], never before the bytes land.
  kPutSignal = 20,
  // Collective: `count` bytes at `src` on PE args[0] land at `dst` on every PE (dst may be src).
  kBroadcast = 21,
  // How long this PE's waits blocked (runtime/peer_waits.h), in nanoseconds: on PE args[0]'s
  // words in `value`, in every wait in `value2`.
  kWaitStats = 22,
};
inline constexpr uint32_t kLastOp = 22;

// Where a MoE call's large input (a dispatch's x, a combine's expert rows) or output (a
// dispatch's recv_x, a combine's tokens) lies: in the staging area where api/staging_layout.h
// puts it, or on the PE's symmetric heap at the request's `src` (input) or `dst` (output)
// offset, a tensor the process made there, which the daemon reads or writes where it lies:
// nothing is copied. A dispatch's recv_x, whose size the process cannot know, goes to the heap
// only when it fits in the request's `dst_bytes`, else to the staging area.
enum class Place : uint16_t {  // 16 bits: a request's two share a word (it has no padding)
  kStaging = 0,
  kHeap = 1,
};

// Offsets are symmetric addresses: bytes from the start of the PE's slice, except the stage_
// and spill_ fields: bytes from the start of the staging area.
//
// Where a call's staged tensors lie (MoE calls and fused ops): api/staging_layout.h's block of
// its inputs from `stage_at`, its outputs' block right after it (64-byte aligned) when both fit
// in `stage_room` bytes, else at `spill_at`. The process picks these past the parts of the area
// it lent out (api/staging_loans.h); the daemon checks that the outputs do not overlap the
// inputs, which it reads while it writes the outputs.
struct Request {
  Op op = Op::kNone;
  uint32_t dtype = 0;                    // wire::DataType
  uint32_t reduce = 0;                   // wire::Reduction
  Place input_place = Place::kStaging;   // MoE calls only
  Place output_place = Place::kStaging;  // MoE calls only
  uint64_t src = 0;
  uint64_t dst = 0;
  uint64_t dst_bytes = 0;  // a dispatch's output on the heap: the room at dst
  uint64_t count = 0;      // elements (kMalloc: bytes)
  uint64_t args[4] = {};
  uint64_t stage_at = 0;
  uint64_t stage_room = 0;
  uint64_t spill_at = 0;
};

enum class Status : int32_t {
  kOk = 0,
  kInvalid = 1,  // the request was wrong (a shape, an offset, an op): the caller's to fix
  kFailed = 2,   // it could not be done (a dead peer, an abort, a deadline)
};

struct Completion {
  Status status;
  uint32_t reserved;
  uint64_t value;
  uint64_t value2;
  uint64_t staging_bytes;       // the staging area's size after the call
  char message[kMessageBytes];  // when not ok, NUL-terminated
};

struct alignas(64) Slot {
  Request request;
  Completion completion;
};

struct Ring {
  uint32_t magic;
  uint32_t version;
  alignas(64) std::atomic<uint32_t> submitted;  // the process's counter
  alignas(64) std::atomic<uint32_t> completed;  // the daemon's counter
  // 1 while a session job serves this ring. A process that detaches when nobody serves it
  // leaves its detach in the ring and goes: nobody would answer.
  alignas(64) std::atomic<uint32_t> serving;
  // Set (then `completed` woken) when the daemon stops serving this PE; why, NUL-terminated.
  alignas(64) std::atomic<uint32_t> closed;
  char closed_reason[kMessageBytes];
  Slot slots[kRingSlots];
};

inline constexpr size_t kRingBytes = (sizeof(Ring) + 4095) / 4096 * 4096;
static_assert(std::atomic<uint32_t>::is_always_lock_free);

}  // namespace symmesh::attach
