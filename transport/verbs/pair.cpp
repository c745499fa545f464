#include "transport/verbs/pair.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <string>

#include "common/errors.h"

namespace symmesh {

VerbsPair::VerbsPair(const VerbsDevice& device, ibv_cq* send_cq, ibv_cq* recv_cq,
                     const QpLimits& limits, uint64_t recv_id)
    : device_(device), recv_depth_(limits.recv_depth), recv_id_(recv_id) {
  ibv_qp_init_attr init{};
  init.send_cq = send_cq;
  init.recv_cq = recv_cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;  // selective signaling
  init.cap.max_send_wr = limits.send_depth;
  init.cap.max_recv_wr = limits.recv_depth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = limits.max_inline;
  qp_ = ibv_create_qp(device.pd(), &init);
  if (!qp_ && limits.max_inline > 0) {  // some devices have no inline data
    init.cap.max_inline_data = 0;
    qp_ = ibv_create_qp(device.pd(), &init);
  }
  if (!qp_) {
    throw Error("verbs: ibv_create_qp on " + device.name() + " failed: " + std::strerror(errno));
  }
  max_inline_ = init.cap.max_inline_data;
  psn_ = std::random_device{}() & 0xffffff;
}

VerbsPair::~VerbsPair() {
  ibv_destroy_qp(qp_);
}

void VerbsPair::modify(ibv_qp_attr& attr, int mask, const char* state) {
  if (int rc = ibv_modify_qp(qp_, &attr, mask); rc != 0) {
    throw Error(std::string("verbs: moving QP ") + std::to_string(qpn()) + " to " + state +
                " failed: " + std::strerror(rc));
  }
}

void VerbsPair::connect(const QpRemote& remote, ibv_mtu mtu) {
  ibv_qp_attr init{};
  init.qp_state = IBV_QPS_INIT;
  init.pkey_index = 0;
  init.port_num = device_.port();
  init.qp_access_flags =
      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  modify(init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
  for (uint32_t i = 0; i < recv_depth_; ++i) post_receive();

  ibv_qp_attr rtr{};
  rtr.qp_state = IBV_QPS_RTR;
  rtr.path_mtu = mtu;
  rtr.dest_qp_num = remote.qpn;
  rtr.rq_psn = remote.psn;
  rtr.max_dest_rd_atomic = static_cast<uint8_t>(std::min(device_.max_qp_rd_atom(), 16));
  rtr.min_rnr_timer = 12;  // 0.64 ms before a sender retries a receive-not-ready
  rtr.ah_attr.port_num = device_.port();
  rtr.ah_attr.dlid = remote.lid;
  if (device_.ethernet()) {
    rtr.ah_attr.is_global = 1;
    rtr.ah_attr.grh.dgid = remote.gid;
    rtr.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_.gid_index());
    rtr.ah_attr.grh.hop_limit = 64;
  }
  modify(rtr,
         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
         "RTR");

  ibv_qp_attr rts{};
  rts.qp_state = IBV_QPS_RTS;
  // 4.096 us * 2^18 = 1.07 s per try. Tries of 67 ms fired on ACKs merely late in a loaded
  // soft-RoCE guest (a thousand duplicate requests in a run), and with atomics among the
  // replayed requests Linux 6.1's rxe could leave a queue pair stalled: the fused operators
  // hung in 2 of 8 full soft-RoCE suites before, none in the runs since. A dead peer now
  // fails after about 7.5 s, well inside every job's wait deadline.
  rts.timeout = 18;
  rts.retry_cnt = 7;
  rts.rnr_retry = 7;  // receives are reposted: wait for them as long as it takes
  rts.sq_psn = psn_;
  rts.max_rd_atomic = static_cast<uint8_t>(std::min(device_.max_qp_rd_atom(), 16));
  modify(rts,
         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
             IBV_QP_MAX_QP_RD_ATOMIC,
         "RTS");
}

void VerbsPair::post_receive() {
  ibv_recv_wr wr{};
  wr.wr_id = recv_id_;
  wr.num_sge = 0;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_, &wr, &bad); rc != 0) {
    throw Error("verbs: posting a receive on QP " + std::to_string(qpn()) +
                " failed: " + std::strerror(rc));
  }
}

}  // namespace symmesh
