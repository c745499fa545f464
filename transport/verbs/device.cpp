#include "transport/verbs/device.h"

#include <arpa/inet.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/errors.h"

namespace symmesh {
namespace {

// Before any registration, so a fork (a test harness, a helper) cannot corrupt pinned pages.
void fork_init_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (int rc = ibv_fork_init(); rc != 0) {
      spdlog::warn("ibv_fork_init failed: {}", std::strerror(rc));
    }
  });
}

struct DeviceList {
  DeviceList() {
    fork_init_once();
    devices = ibv_get_device_list(&count);
  }
  ~DeviceList() {
    if (devices) ibv_free_device_list(devices);
  }
  ibv_device** devices = nullptr;
  int count = 0;
};

bool ipv4_mapped(const ibv_gid& gid) {
  static constexpr uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, prefix, sizeof(prefix)) == 0;
}

bool link_local(const ibv_gid& gid) {
  return gid.raw[0] == 0xfe && (gid.raw[1] & 0xc0) == 0x80;
}

bool zero(const ibv_gid& gid) {
  static constexpr uint8_t none[16] = {};
  return std::memcmp(gid.raw, none, sizeof(none)) == 0;
}

}  // namespace

std::vector<std::string> verbs_devices() {
  DeviceList list;
  std::vector<std::string> names;
  for (int i = 0; list.devices && i < list.count; ++i) {
    names.emplace_back(ibv_get_device_name(list.devices[i]));
  }
  return names;
}

std::string gid_text(const ibv_gid& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.raw, text, sizeof(text));
  return text;
}

int mtu_bytes(ibv_mtu mtu) {
  return 128 << static_cast<int>(mtu);  // IBV_MTU_256 is 1
}

VerbsDevice::VerbsDevice(const VerbsDeviceOptions& options) {
  DeviceList list;
  if (!list.devices || list.count == 0) {
    throw Error("verbs: no RDMA device (ibv_get_device_list found none)");
  }
  std::string names;
  std::string inactive;  // "rxe0 (PORT_DOWN)", the devices whose port 1 is not active
  for (int i = 0; i < list.count && !context_; ++i) {
    const std::string name = ibv_get_device_name(list.devices[i]);
    names += (names.empty() ? "" : ", ") + name;
    if (!options.device.empty() && name != options.device) continue;
    ibv_context* context = ibv_open_device(list.devices[i]);
    if (!context) continue;
    ibv_device_attr device{};
    ibv_port_attr port{};
    const bool queried =
        ibv_query_device(context, &device) == 0 && ibv_query_port(context, 1, &port) == 0;
    if (queried && port.state == IBV_PORT_ACTIVE) {
      context_ = context;
      name_ = name;
      port_ = 1;
      lid_ = port.lid;
      active_mtu_ = port.active_mtu;
      max_msg_sz_ = port.max_msg_sz;
      max_qp_rd_atom_ = std::max(1, device.max_qp_rd_atom);
      atomics_global_ = device.atomic_cap == IBV_ATOMIC_GLOB;
      gid_table_length_ = port.gid_tbl_len;
      ethernet_ = port.link_layer == IBV_LINK_LAYER_ETHERNET;
    } else {
      ibv_close_device(context);
      const std::string state = queried ? ibv_port_state_str(port.state) : "not readable";
      if (!options.device.empty()) {
        throw PortNotActive("--rdma-device " + name + ": port 1 is not active (" + state + ")");
      }
      inactive += (inactive.empty() ? "" : ", ") + name + " (" + state + ")";
    }
  }
  if (!context_) {
    if (!options.device.empty()) {
      throw InvalidArgument("--rdma-device " + options.device +
                            ": no such device (devices: " + names + ")");
    }
    if (!inactive.empty()) {
      throw PortNotActive("verbs: no device with an active port 1 (not active: " + inactive + ")");
    }
    throw Error("verbs: no device with an active port 1 (devices: " + names + ")");
  }
  try {
    choose_gid(options.gid_index);
  } catch (...) {
    ibv_close_device(context_);
    throw;
  }
  pd_ = ibv_alloc_pd(context_);
  if (!pd_) {
    ibv_close_device(context_);
    throw Error("verbs: ibv_alloc_pd on " + name_ + " failed: " + std::strerror(errno));
  }
}

VerbsDevice::~VerbsDevice() {
  ibv_dealloc_pd(pd_);
  ibv_close_device(context_);
}

void VerbsDevice::choose_gid(int requested) {
  auto query = [&](int index, ibv_gid_entry& entry) {
    return ibv_query_gid_ex(context_, port_, index, &entry, 0) == 0;
  };
  if (requested >= 0) {
    ibv_gid_entry entry{};
    if (requested >= gid_table_length_ || !query(requested, entry) ||
        zero(*reinterpret_cast<ibv_gid*>(entry.gid.raw))) {
      throw InvalidArgument("--rdma-gid-index " + std::to_string(requested) + ": no GID there on " +
                            name_ + " port 1 (table length " + std::to_string(gid_table_length_) +
                            "; `ibv_devinfo -v` lists them)");
    }
    gid_index_ = requested;
    std::memcpy(gid_.raw, entry.gid.raw, sizeof(gid_.raw));
    return;
  }
  if (!ethernet_) {  // InfiniBand: the port GID at index 0, addressed by LID
    ibv_query_gid(context_, port_, 0, &gid_);
    gid_index_ = 0;
    return;
  }
  int best = -1;
  int best_rank = 0;
  for (int index = 0; index < gid_table_length_; ++index) {
    ibv_gid_entry entry{};
    if (!query(index, entry)) continue;
    ibv_gid gid;
    std::memcpy(gid.raw, entry.gid.raw, sizeof(gid.raw));
    if (zero(gid) || link_local(gid)) continue;
    const bool v2 = entry.gid_type == IBV_GID_TYPE_ROCE_V2;
    const int rank = (v2 ? 2 : 0) + (ipv4_mapped(gid) ? 1 : 0);
    if (rank > best_rank || best < 0) {
      best = index;
      best_rank = rank;
      gid_ = gid;
    }
  }
  if (best < 0) {
    throw InvalidArgument("verbs: " + name_ +
                          " port 1 has no routable GID (only link-local or empty entries); give "
                          "an address to its network interface or pass --rdma-gid-index");
  }
  gid_index_ = best;
}

std::string VerbsDevice::describe() const {
  return name_ + " port " + std::to_string(port_) + ", GID index " + std::to_string(gid_index_) +
         " (" + gid_text(gid_) + "), MTU " + std::to_string(mtu_bytes(active_mtu_));
}

MemoryRegion VerbsDevice::register_memory(void* base, size_t length, int access) const {
  ibv_mr* mr = ibv_reg_mr(pd_, base, length, access);
  if (!mr) {
    throw Error("verbs: registering " + std::to_string(length) + " bytes on " + name_ +
                " failed: " + std::strerror(errno) +
                (errno == ENOMEM ? " (raise the locked-memory limit: ulimit -l unlimited, or "
                                   "LimitMEMLOCK=infinity)"
                                 : ""));
  }
  return MemoryRegion(mr);
}

}  // namespace symmesh
