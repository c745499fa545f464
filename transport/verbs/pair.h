// A verbs pair: one reliable-connected queue pair to a peer node (each local rank has its
// own to each peer) and its state machine (RESET -> INIT -> RTR -> RTS). Receives are
// zero-length: they only catch the immediate of a notifying write.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "transport/verbs/device.h"

namespace symmesh {

struct QpRemote {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  ibv_gid gid{};
  uint16_t lid = 0;
};

struct QpLimits {
  uint32_t send_depth = 256;
  uint32_t recv_depth = 128;
  uint32_t max_inline = 64;
};

class VerbsPair {
 public:
  VerbsPair(const VerbsDevice& device, ibv_cq* send_cq, ibv_cq* recv_cq, const QpLimits& limits,
            uint64_t recv_id);
  ~VerbsPair();
  VerbsPair(const VerbsPair&) = delete;
  VerbsPair& operator=(const VerbsPair&) = delete;

  ibv_qp* get() const { return qp_; }
  uint32_t qpn() const { return qp_->qp_num; }
  uint32_t psn() const { return psn_; }
  uint32_t max_inline() const { return max_inline_; }

  // INIT (receives posted) -> RTR -> RTS against `remote`, with the negotiated path MTU.
  void connect(const QpRemote& remote, ibv_mtu mtu);
  // Posts one zero-length receive, tagged with the id given at construction.
  void post_receive();

 private:
  void modify(ibv_qp_attr& attr, int mask, const char* state);

  const VerbsDevice& device_;
  ibv_qp* qp_ = nullptr;
  uint32_t psn_ = 0;
  uint32_t max_inline_ = 0;
  uint32_t recv_depth_ = 0;
  uint64_t recv_id_ = 0;
};

}  // namespace symmesh
