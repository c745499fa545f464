// The shm transport: the PEs of one node share its segment, so a put is a memcpy into the
// target PE's slice and an atomic is an atomic instruction on the word.
#pragma once

#include "transport/transport.h"
#include "transport/wait.h"

namespace symmesh {

class ShmTransport final : public Transport {
 public:
  ShmTransport(SegmentView segment, Doorbell& doorbell, int node);

  std::string_view name() const override { return "shm"; }
  void put_gather(int src_pe, int node, uint64_t offset, std::span<const PutPiece> source,
                  const SignalUpdate* signal) override;
  void get(int src_pe, int node, uint64_t offset, void* out, size_t length) override;
  void atomic_add(int src_pe, int node, uint64_t offset, uint64_t value) override;
  uint64_t atomic_fetch_add(int src_pe, int node, uint64_t offset, uint64_t value) override;
  void fence(int src_pe) override;
  void quiet(int src_pe) override;

 private:
  void check(int node, uint64_t offset, uint64_t length, bool word) const;

  SegmentView segment_;
  Doorbell& doorbell_;
  int node_;
};

}  // namespace symmesh
