// An RDMA device as the verbs transport uses it: the opened context, one port, the GID the
// connections use, a protection domain, and memory registration. The GID index is chosen
// automatically unless given: a RoCE v2 IPv4-mapped GID first, then any RoCE v2 GID that is
// not link-local, never the link-local index 0 (on InfiniBand, where GIDs are not routed,
// index 0 is right and is used).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transport/rdma.h"

namespace symmesh {

struct MrDeleter {
  void operator()(ibv_mr* mr) const { ibv_dereg_mr(mr); }
};
using MemoryRegion = std::unique_ptr<ibv_mr, MrDeleter>;

class VerbsDevice {
 public:
  // Throws InvalidArgument naming the device or GID index that was wrong and what exists,
  // PortNotActive when the device (or every device) has no link on port 1, or Error when the
  // host has no usable device.
  explicit VerbsDevice(const VerbsDeviceOptions& options);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const std::string& name() const { return name_; }
  uint8_t port() const { return port_; }
  int gid_index() const { return gid_index_; }
  const ibv_gid& gid() const { return gid_; }
  uint16_t lid() const { return lid_; }
  ibv_mtu active_mtu() const { return active_mtu_; }
  uint64_t max_msg_sz() const { return max_msg_sz_; }
  int max_qp_rd_atom() const { return max_qp_rd_atom_; }
  // ATOMIC_GLOB: the device's atomics are atomic against the CPU's too. Otherwise
  // (ATOMIC_HCA, soft-RoCE among them) only against the device's own.
  bool atomics_global() const { return atomics_global_; }
  bool ethernet() const { return ethernet_; }
  // "rxelo port 1, GID index 1 (::ffff:127.0.0.1), MTU 1024"
  std::string describe() const;

  MemoryRegion register_memory(void* base, size_t length, int access) const;

 private:
  void choose_gid(int requested);

  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::string name_;
  uint8_t port_ = 1;
  int gid_index_ = 0;
  ibv_gid gid_{};
  uint16_t lid_ = 0;
  ibv_mtu active_mtu_ = IBV_MTU_1024;
  uint64_t max_msg_sz_ = 0;
  int max_qp_rd_atom_ = 1;
  int gid_table_length_ = 0;
  bool ethernet_ = true;
  bool atomics_global_ = false;
};

std::string gid_text(const ibv_gid& gid);
int mtu_bytes(ibv_mtu mtu);

}  // namespace symmesh
