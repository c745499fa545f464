// A node's transport to itself when its peers add to its words with device atomics that are
// atomic only against other device atomics (ATOMIC_HCA: soft-RoCE, and many real NICs): a
// CPU fetch-add and a device fetch-add on one word can then lose one of the two. So this
// node's PEs add to their own node's words through the device too, over the loop QP; plain
// puts and gets stay memcpy (the shm transport). Adds are waited for, then the doorbell rung.
// Not needed (and not used) on an ATOMIC_GLOB device.
#pragma once

#include "transport/transport.h"
#include "transport/verbs/verbs_transport.h"

namespace symmesh {

class DeviceAtomicsTransport final : public Transport {
 public:
  DeviceAtomicsTransport(Transport& shm, VerbsTransport& verbs, SegmentView segment,
                         Doorbell& doorbell)
      : shm_(shm), verbs_(verbs), segment_(segment), doorbell_(doorbell) {}

  std::string_view name() const override { return "shm"; }
  void put_gather(int src_pe, int node, uint64_t offset, std::span<const PutPiece> source,
                  const SignalUpdate* signal) override;
  void get(int src_pe, int node, uint64_t offset, void* out, size_t length) override {
    shm_.get(src_pe, node, offset, out, length);
  }
  void atomic_add(int src_pe, int node, uint64_t offset, uint64_t value) override {
    atomic_fetch_add(src_pe, node, offset, value);
  }
  uint64_t atomic_fetch_add(int src_pe, int node, uint64_t offset, uint64_t value) override;
  void fence(int src_pe) override { shm_.fence(src_pe); }
  void quiet(int src_pe) override { shm_.quiet(src_pe); }

 private:
  Transport& shm_;
  VerbsTransport& verbs_;
  SegmentView segment_;
  Doorbell& doorbell_;
};

}  // namespace symmesh
