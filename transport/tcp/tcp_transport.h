// The tcp transport (asio): remote writes are applied into the target segment by the
// receiving node's io threads, every offset and length checked against the segment first.
// Its parts, as every network transport's: the device (tcp/device.h) sets connections up,
// a pair (tcp/pair.h) is one connection to a peer, the buffer (tcp/buffer.h) is the segment
// as peers' frames reach it, the address (tcp/address.h) is what the bootstrap exchanges.
//
// Connections: `connections_per_peer` per node pair, the lower node rank dials. A PE sends
// on its home connection (local rank modulo the count), so its operations to one node stay
// in order; puts of at least `stripe_threshold` bytes are split over the connections, the
// first stripe on the home connection, and a put_signal split so carries its signal on every
// stripe, applied once after the last one. quiet() is a FLUSH round trip on each connection
// the PE used: TCP keeps order, so the reply means everything before it was applied. An
// operation that leaves a connection out (one on the home connection, or a put too short to
// fill a stripe on each) first waits for the PE's earlier stripes, so a signal seen means
// every earlier operation of its PE to that node was applied. A striped put's data may still
// land before an earlier operation's; fence() orders that (OpenSHMEM's fence): the next
// striped put after it quiets first.
// Receiving: the io threads read what epoll reports, and a PE that waits polls every
// connection between its checks (WaitProgress, through the node's WaitPolicy), so on a busy
// host the frame it waits for does not wait for an io thread to be scheduled; while PEs
// poll, small frames wake no io thread at all (tcp/polling_mode.h).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "transport/channel.h"
#include "transport/tcp/buffer.h"
#include "transport/tcp/device.h"
#include "transport/tcp/pair.h"
#include "transport/tcp/polling_mode.h"
#include "transport/transport.h"
#include "transport/wait.h"

namespace symmesh {

struct TcpOptions {
  int connections_per_peer = 2;
  size_t stripe_threshold = size_t{1} << 20;
  size_t eager_limit = size_t{64} << 10;  // puts up to this size are copied and return at once
  int io_threads = 2;
  std::chrono::milliseconds op_timeout{60000};
  uint64_t incarnation = 0;  // this daemon's, proved in every data handshake
  // Each connection's SO_SNDBUF; 0 leaves the kernel's. Tests make it small, so that the kernel
  // takes a large frame in parts and the io threads write the rest.
  int send_buffer_bytes = 0;
};

class TcpTransport final : public NetworkTransport, public WaitProgress, private FrameHandler {
 public:
  TcpTransport(int node, int nodes, int ranks_per_node, SegmentView segment, Doorbell& doorbell,
               std::string secret, TcpOptions options);
  ~TcpTransport() override;

  // Starts accepting data connections on `at` (port 0 picks one); returns the address.
  HostPort listen(const HostPort& at);
  HostPort listening_on() const { return device_.listening_on(); }
  // Dials the higher-ranked nodes and waits until every pair has all its connections.
  // `endpoints[n]` is node n's data address. Throws PeerError naming the missing nodes.
  void connect(const std::vector<HostPort>& endpoints, Deadline deadline);
  // Ensures everything this node sent, on every connection, has been applied.
  void flush_all(Deadline deadline) override;
  void shutdown() override;
  void expect_shutdown() override { closing_expected_.store(true); }
  // PEs that wait drive this transport's progress.
  void shape_wait_policy(WaitPolicy& policy) override { policy.progress = this; }

  // Called (on the accept thread) for each data connection refused in its handshake, with
  // how to count it: "auth", "bad_request" or "timeout".
  void on_refused(std::function<void(const std::string& kind)> callback) override {
    device_.on_refused(std::move(callback));
  }

  std::string_view name() const override { return "tcp"; }
  void put_gather(int src_pe, int node, uint64_t offset, std::span<const PutPiece> source,
                  const SignalUpdate* signal) override;
  void get(int src_pe, int node, uint64_t offset, void* out, size_t length) override;
  void atomic_add(int src_pe, int node, uint64_t offset, uint64_t value) override;
  uint64_t atomic_fetch_add(int src_pe, int node, uint64_t offset, uint64_t value) override;
  void fence(int src_pe) override;
  void quiet(int src_pe) override;

  // WaitProgress: poll() reads and applies what arrived on any connection no other thread is
  // reading.
  void start_polling() override { polling_.start_polling(); }
  void stop_polling() override { polling_.stop_polling(); }
  bool poll() override;
  void start_parking() override { polling_.start_parking(); }
  void stop_parking() override { polling_.stop_parking(); }

 private:
  struct Pending {
    std::shared_ptr<Completion> completion = std::make_shared<Completion>();
    std::vector<std::byte> data;  // GET_REPLY payload
    uint64_t value = 0;           // FETCH_ADD_REPLY
    int node = -1;
  };
  struct PeState {
    std::vector<std::vector<bool>> dirty;  // [node][connection] used since the last quiet
    bool striped_since_fence = false;
    bool fence_requested = false;  // fence() called since the last quiet
    uint64_t next_signal_id = 0;
  };

  // FrameHandler
  std::byte* payload_target(TcpPair& from, const wire::DataHeader& header, std::string& error,
                            std::shared_ptr<void>& keep_alive) override;
  void frame_complete(TcpPair& from, const wire::DataHeader& header) override;
  void frame_written() override { doorbell_.ring(); }
  void connection_lost(TcpPair& connection, const std::string& why) override;

  void adopt(std::unique_ptr<BlockingChannel> channel, int peer_node, uint32_t index);
  // With mutex_ held: what progress() polls becomes all_connections_.
  void publish_polled();
  // This transport's own waits: the default policy, driving this transport's progress.
  WaitPolicy wait_policy() {
    WaitPolicy policy;
    policy.progress = this;
    return policy;
  }
  std::shared_ptr<TcpPair> connection(int node, uint32_t index) const;
  // A quiet when the PE striped a put since its last one: an operation that leaves a
  // connection out then cannot overtake that put's last stripe.
  void wait_for_stripes(int src_pe);
  uint32_t home_connection(int src_pe) const;
  PeState& pe_state(int src_pe);
  // Registers a reply-carrying request; the caller sends it and waits.
  std::pair<uint64_t, std::shared_ptr<Pending>> register_pending(int node);
  // Sends `header` (a GET_REQUEST or FETCH_ADD) on the PE's home connection and waits for its
  // reply (of `reply_bytes` payload bytes); `what` names it in a timeout.
  std::shared_ptr<Pending> round_trip(int src_pe, int node, wire::DataHeader header,
                                      size_t reply_bytes, const std::string& what);
  void wait_for(const Completion& completion, Deadline deadline, const std::string& what);
  void reply(TcpPair& to, wire::DataHeader header, const void* payload, size_t length);
  void send_flushes(const std::vector<std::pair<int, uint32_t>>& targets, int src_pe,
                    Deadline deadline);
  std::string describe_node(int node) const;

  const int node_;
  const int nodes_;
  const int ranks_per_node_;
  Doorbell& doorbell_;
  const TcpOptions options_;
  TcpBuffer buffer_;
  TcpDevice device_;
  PollingMode polling_;  // after device_: its tick runs on one of device_'s io threads
  std::atomic<bool> stopping_{false};
  std::atomic<bool> closing_expected_{false};

  mutable std::mutex mutex_;  // connections_, all_connections_, endpoints_
  std::condition_variable connected_;
  std::vector<std::vector<std::shared_ptr<TcpPair>>> connections_;  // send set
  std::vector<std::shared_ptr<TcpPair>> all_connections_;
  // A copy of all_connections_ that waiting PEs poll without taking mutex_. Guarded by its own
  // mutex, held only to copy the pointer: libstdc++'s atomic<shared_ptr> is invisible to TSan.
  using Connections = std::vector<std::shared_ptr<TcpPair>>;
  mutable std::mutex polled_mutex_;
  std::shared_ptr<const Connections> polled_;
  std::shared_ptr<const Connections> polled() const;
  std::vector<HostPort> endpoints_;

  std::mutex pending_mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<Pending>> pending_;
  std::atomic<uint64_t> next_token_{1};

  std::vector<PeState> pe_states_;
};

}  // namespace symmesh
