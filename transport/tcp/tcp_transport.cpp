#include "transport/tcp/tcp_transport.h"

#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/errors.h"
#include "transport/piece_cursor.h"

namespace symmesh {
namespace {

constexpr size_t kStripeAlignment = 4096;

}  // namespace

TcpTransport::TcpTransport(int node, int nodes, int ranks_per_node, SegmentView segment,
                           Doorbell& doorbell, std::string secret, TcpOptions options)
    : NetworkTransport(nodes),
      node_(node),
      nodes_(nodes),
      ranks_per_node_(ranks_per_node),
      doorbell_(doorbell),
      options_(options),
      buffer_(segment),
      device_(node, nodes, std::move(secret), options.incarnation, options.io_threads),
      polling_(device_.next_io(),
               [this](bool raised) {
                 const auto polled = this->polled();
                 if (!polled) return;
                 for (const auto& connection : *polled) {
                   connection->set_receive_low_water(raised ? PollingMode::kRaisedLowWater : 1);
                 }
               }),
      connections_(nodes, std::vector<std::shared_ptr<TcpPair>>(
                              static_cast<size_t>(options.connections_per_peer))),
      pe_states_(ranks_per_node) {
  if (options_.connections_per_peer < 1 || options_.connections_per_peer > 16) {
    throw InvalidArgument("tcp connections per peer must be in 1..16, got " +
                          std::to_string(options_.connections_per_peer));
  }
  for (auto& state : pe_states_) {
    state.dirty.assign(nodes, std::vector<bool>(options_.connections_per_peer, false));
  }
}

TcpTransport::~TcpTransport() {
  shutdown();
}

void TcpTransport::shutdown() {
  if (stopping_.exchange(true)) return;
  polling_.stop();
  device_.stop_accepting();
  std::vector<std::shared_ptr<TcpPair>> all;
  {
    std::lock_guard lock(mutex_);
    all = all_connections_;
  }
  for (auto& connection : all) connection->close("transport shut down");
  device_.stop_io();
  std::lock_guard lock(mutex_);
  all_connections_.clear();
  publish_polled();
  for (auto& row : connections_) row.assign(row.size(), nullptr);
}

void TcpTransport::publish_polled() {
  auto copy = std::make_shared<const Connections>(all_connections_);
  std::lock_guard lock(polled_mutex_);
  polled_.swap(copy);  // the old copy is released after the lock
}

std::shared_ptr<const TcpTransport::Connections> TcpTransport::polled() const {
  std::lock_guard lock(polled_mutex_);
  return polled_;
}

bool TcpTransport::poll() {
  const auto polled = this->polled();
  if (!polled) return false;
  int frames = 0;
  for (const auto& connection : *polled) frames += connection->poll();
  return frames > 0;
}

std::string TcpTransport::describe_node(int node) const {
  std::string text = "node " + std::to_string(node);
  if (node >= 0 && static_cast<size_t>(node) < endpoints_.size()) {
    text += " (" + endpoints_[node].str() + ")";
  }
  return text;
}

HostPort TcpTransport::listen(const HostPort& at) {
  return device_.listen(at, [this](std::unique_ptr<BlockingChannel> channel, int peer,
                                   uint32_t index) { adopt(std::move(channel), peer, index); });
}

void TcpTransport::adopt(std::unique_ptr<BlockingChannel> channel, int peer_node, uint32_t index) {
  const std::string name = channel->peer_name();
  const int fd = channel->release_native();
  if (options_.send_buffer_bytes > 0 &&
      ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &options_.send_buffer_bytes,
                   sizeof options_.send_buffer_bytes) != 0) {
    spdlog::warn("tcp: setting SO_SNDBUF to {} bytes failed: {}", options_.send_buffer_bytes,
                 std::strerror(errno));
  }
  auto connection = std::make_shared<TcpPair>(device_.next_io(), fd, node_, peer_node, index, name,
                                              static_cast<FrameHandler&>(*this));
  {
    std::lock_guard lock(mutex_);
    all_connections_.push_back(connection);
    publish_polled();
    auto& row = connections_[peer_node];
    // Connections beyond the configured count only receive (their replies go back on them).
    if (index < row.size() && !row[index]) row[index] = connection;
  }
  connected_.notify_all();
  polling_.with_mode([&](bool raised) {
    if (raised) connection->set_receive_low_water(PollingMode::kRaisedLowWater);
  });
  connection->start();
}

void TcpTransport::connect(const std::vector<HostPort>& endpoints, Deadline deadline) {
  if (endpoints.size() != static_cast<size_t>(nodes_)) {
    throw InvalidArgument("tcp connect: " + std::to_string(endpoints.size()) + " endpoints for " +
                          std::to_string(nodes_) + " nodes");
  }
  {
    std::lock_guard lock(mutex_);
    endpoints_ = endpoints;
  }
  for (int peer = node_ + 1; peer < nodes_; ++peer) {
    for (int index = 0; index < options_.connections_per_peer; ++index) {
      adopt(device_.dial(endpoints[peer], peer, uint32_t(index), deadline), peer, uint32_t(index));
    }
  }
  std::unique_lock lock(mutex_);
  auto missing = [&] {
    std::string text;
    for (int peer = 0; peer < nodes_; ++peer) {
      if (peer == node_) continue;
      for (size_t i = 0; i < connections_[peer].size(); ++i) {
        if (!connections_[peer][i])
          text +=
              (text.empty() ? "" : ", ") + describe_node(peer) + " connection " + std::to_string(i);
      }
    }
    return text;
  };
  if (!connected_.wait_until(lock, deadline, [&] { return missing().empty(); })) {
    throw PeerError("node " + std::to_string(node_) +
                    ": data connections never arrived from: " + missing());
  }
}

std::shared_ptr<TcpPair> TcpTransport::connection(int node, uint32_t index) const {
  if (node < 0 || node >= nodes_ || node == node_) {
    throw InvalidArgument("tcp transport of node " + std::to_string(node_) + ": node " +
                          std::to_string(node) + " is not a peer (0.." +
                          std::to_string(nodes_ - 1) + ", not itself)");
  }
  health_.check(node, [&] { return describe_node(node); });
  std::lock_guard lock(mutex_);
  auto connection = connections_[node][index];
  if (!connection) throw PeerError(describe_node(node) + " is not connected");
  return connection;
}

uint32_t TcpTransport::home_connection(int src_pe) const {
  return static_cast<uint32_t>((src_pe % ranks_per_node_) % options_.connections_per_peer);
}

TcpTransport::PeState& TcpTransport::pe_state(int src_pe) {
  const int local = src_pe - node_ * ranks_per_node_;
  if (local < 0 || local >= ranks_per_node_) {
    throw InvalidArgument("PE " + std::to_string(src_pe) + " does not live on node " +
                          std::to_string(node_));
  }
  return pe_states_[local];
}

void TcpTransport::wait_for(const Completion& completion, Deadline deadline,
                            const std::string& what) {
  wait_until(
      doorbell_, deadline, [&] { return completion.finished(); },
      [&] { return "node " + std::to_string(node_) + " waiting for " + what; }, wait_policy());
  if (completion.state.load(std::memory_order_acquire) == 2) throw PeerError(completion.error);
}

void TcpTransport::put_gather(int src_pe, int node, uint64_t offset,
                              std::span<const PutPiece> source, const SignalUpdate* signal) {
  const size_t length = total_length(source);
  traffic_.sent(node, length);
  PeState& state = pe_state(src_pe);
  wire::DataHeader header;
  header.set_kind(wire::PUT);
  header.set_src_pe(static_cast<uint32_t>(src_pe));
  if (signal) {
    header.set_has_signal(true);
    header.set_signal_offset(signal->offset);
    header.set_signal_value(signal->value);
    header.set_signal_kind(signal->op == SignalOp::kSet ? wire::SIGNAL_SET : wire::SIGNAL_ADD);
  }
  const auto connections = static_cast<uint32_t>(options_.connections_per_peer);
  const bool striped = length > 0 && length >= options_.stripe_threshold && connections > 1;
  size_t stripe_length = length;
  uint32_t stripes = 1;
  if (striped) {
    const size_t share = (length + connections - 1) / connections;
    stripe_length = (share + kStripeAlignment - 1) / kStripeAlignment * kStripeAlignment;
    stripes = static_cast<uint32_t>((length + stripe_length - 1) / stripe_length);
    header.set_stripe_count(stripes);
    header.set_signal_id(state.next_signal_id++);
  }
  // A put's first (or only) frame goes on the PE's home connection, behind its earlier
  // operations there, so its signal, applied after its last frame, follows theirs. A put that
  // leaves a connection out could overtake the last stripe of an earlier striped one there,
  // and its signal then land first: a SET would be undone by the older one (seen as an
  // all-to-all-v that waited forever). So it waits for those stripes first; a put on every
  // connection queues behind each of them. After fence(), a striped put waits for everything
  // before it, so that its stripes on other connections cannot write before earlier data
  // either.
  if (stripes > 1 && state.fence_requested) {
    quiet(src_pe);
  } else if (stripes < connections) {
    wait_for_stripes(src_pe);
  }

  // Frames whose payload is the caller's memory: the put returns only once the kernel has it
  // (or its connection failed them), whatever happens.
  std::vector<std::pair<std::shared_ptr<TcpPair>, std::shared_ptr<Completion>>> borrowed;
  auto all_written = [&] {
    for (auto& [conn, completion] : borrowed) {
      if (!completion->finished()) return false;
    }
    return true;
  };
  // Closes the connections that hold borrowed frames, which fails those frames, and waits a
  // little for that.
  auto release_borrowed = [&](const char* why) {
    for (auto& [conn, completion] : borrowed) conn->close(why);
    const auto cutoff = Clock::now() + std::chrono::seconds(5);
    while (!all_written() && Clock::now() < cutoff)
      doorbell_.park(doorbell_.sequence(), std::chrono::milliseconds(1));
  };
  PieceCursor pieces(source);
  size_t done = 0;
  uint32_t index = home_connection(src_pe);
  try {
    do {
      const size_t part = std::min(stripe_length, length - done);
      auto target = connection(node, index);
      header.set_offset(offset + done);
      header.set_length(part);
      OutFrame frame = make_frame(header);
      if (part <= options_.eager_limit) {
        frame.owned_payload.reserve(part);
        pieces.take(part, [&](const std::byte* data, size_t n) {
          frame.owned_payload.append(reinterpret_cast<const char*>(data), n);
        });
      } else {
        pieces.take(part, [&](const std::byte* data, size_t n) {
          frame.payload.push_back({data, n});
        });
        frame.written = std::make_shared<Completion>();
        borrowed.emplace_back(target, frame.written);
      }
      target->send(std::move(frame));
      state.dirty[node][index] = true;
      done += part;
      index = (index + 1) % connections;
    } while (done < length);
  } catch (...) {  // a later stripe's connection is gone: the earlier stripes still hold `source`
    release_borrowed("put failed");
    throw;
  }
  if (stripes > 1) state.striped_since_fence = true;

  if (borrowed.empty()) return;
  WaitPolicy policy = wait_policy();
  policy.abortable = false;  // through an abort too
  try {
    wait_until(
        doorbell_, Clock::now() + options_.op_timeout, all_written,
        [&] {
          return "PE " + std::to_string(src_pe) + " sending " + std::to_string(length) +
                 " bytes to " + describe_node(node);
        },
        policy);
  } catch (const TimeoutError&) {
    release_borrowed("put timed out");  // the peer stopped reading
    throw;
  }
  for (auto& [conn, completion] : borrowed) {
    if (completion->state.load(std::memory_order_acquire) == 2) throw PeerError(completion->error);
  }
}

std::pair<uint64_t, std::shared_ptr<TcpTransport::Pending>> TcpTransport::register_pending(
    int node) {
  auto pending = std::make_shared<Pending>();
  pending->node = node;
  const uint64_t token = next_token_.fetch_add(1);
  std::lock_guard lock(pending_mutex_);
  pending_[token] = pending;
  return {token, pending};
}

std::shared_ptr<TcpTransport::Pending> TcpTransport::round_trip(int src_pe, int node,
                                                                wire::DataHeader header,
                                                                size_t reply_bytes,
                                                                const std::string& what) {
  auto [token, pending] = register_pending(node);
  pending->data.resize(reply_bytes);
  header.set_src_pe(static_cast<uint32_t>(src_pe));
  header.set_token(token);
  try {
    connection(node, home_connection(src_pe))->send(make_request(header));
    wait_for(*pending->completion, Clock::now() + options_.op_timeout, what);
  } catch (...) {
    std::lock_guard lock(pending_mutex_);
    pending_.erase(token);
    throw;
  }
  return pending;
}

void TcpTransport::get(int src_pe, int node, uint64_t offset, void* out, size_t length) {
  traffic_.sent(node, 0);    // the data comes back as a received GET_REPLY
  wait_for_stripes(src_pe);  // after earlier stripes, as put does
  wire::DataHeader header;
  header.set_kind(wire::GET_REQUEST);
  header.set_offset(offset);
  header.set_length(length);
  const auto pending =
      round_trip(src_pe, node, header, length,
                 "get of " + std::to_string(length) + " bytes from " + describe_node(node));
  if (length > 0) std::memcpy(out, pending->data.data(), length);
}

void TcpTransport::atomic_add(int src_pe, int node, uint64_t offset, uint64_t value) {
  traffic_.sent(node, 8);
  wait_for_stripes(src_pe);  // after earlier stripes, as put does
  wire::DataHeader header;
  header.set_kind(wire::ATOMIC_ADD);
  header.set_src_pe(static_cast<uint32_t>(src_pe));
  header.set_offset(offset);
  header.set_value(value);
  const uint32_t index = home_connection(src_pe);
  connection(node, index)->send(make_frame(header));
  pe_state(src_pe).dirty[node][index] = true;
}

uint64_t TcpTransport::atomic_fetch_add(int src_pe, int node, uint64_t offset, uint64_t value) {
  traffic_.sent(node, 8);
  wait_for_stripes(src_pe);  // after earlier stripes, as put does
  wire::DataHeader header;
  header.set_kind(wire::FETCH_ADD);
  header.set_offset(offset);
  header.set_value(value);
  return round_trip(src_pe, node, header, 0,
                    "fetch-add at offset " + std::to_string(offset) + " of " + describe_node(node))
      ->value;
}

void TcpTransport::send_flushes(const std::vector<std::pair<int, uint32_t>>& targets, int src_pe,
                                Deadline deadline) {
  std::vector<std::pair<uint64_t, std::shared_ptr<Pending>>> waits;
  try {
    for (auto [node, index] : targets) {
      auto registered = register_pending(node);
      wire::DataHeader header;
      header.set_kind(wire::FLUSH);
      header.set_src_pe(static_cast<uint32_t>(std::max(src_pe, 0)));
      header.set_token(registered.first);
      waits.push_back(registered);
      connection(node, index)->send(make_request(header));
    }
    for (auto& [token, pending] : waits) {
      wait_for(*pending->completion, deadline, "flush of " + describe_node(pending->node));
    }
  } catch (...) {
    std::lock_guard lock(pending_mutex_);
    for (auto& [token, pending] : waits) pending_.erase(token);
    throw;
  }
}

void TcpTransport::quiet(int src_pe) {
  PeState& state = pe_state(src_pe);
  std::vector<std::pair<int, uint32_t>> targets;
  for (int node = 0; node < nodes_; ++node) {
    for (size_t i = 0; i < state.dirty[node].size(); ++i) {
      if (state.dirty[node][i]) targets.emplace_back(node, static_cast<uint32_t>(i));
    }
  }
  if (targets.empty()) {  // nothing sent since the last quiet: nothing for a fence to order
    state.fence_requested = false;
    return;
  }
  send_flushes(targets, src_pe, Clock::now() + options_.op_timeout);
  for (auto& row : state.dirty) row.assign(row.size(), false);
  state.striped_since_fence = false;
  state.fence_requested = false;
}

void TcpTransport::wait_for_stripes(int src_pe) {
  if (pe_state(src_pe).striped_since_fence) quiet(src_pe);
}

// Operations on the home connection stay in order by themselves; only a later striped put
// could pass an earlier operation, so the quiet is put off until one comes, if one does.
// (Pe::fence calls this once per remote node: after the first call has quieted, the others
// find nothing sent and ask for nothing.)
void TcpTransport::fence(int src_pe) {
  PeState& state = pe_state(src_pe);
  if (state.striped_since_fence) {
    quiet(src_pe);
    return;
  }
  for (const std::vector<bool>& connections : state.dirty) {
    if (std::find(connections.begin(), connections.end(), true) != connections.end()) {
      state.fence_requested = true;
      return;
    }
  }
}

void TcpTransport::flush_all(Deadline deadline) {
  std::vector<std::pair<int, uint32_t>> targets;
  {
    std::lock_guard lock(mutex_);
    for (int node = 0; node < nodes_; ++node) {
      if (node == node_ || !health_.up(node)) continue;
      for (size_t i = 0; i < connections_[node].size(); ++i) {
        if (connections_[node][i]) targets.emplace_back(node, static_cast<uint32_t>(i));
      }
    }
  }
  send_flushes(targets, -1, deadline);
}

void TcpTransport::reply(TcpPair& to, wire::DataHeader header, const void* payload, size_t length) {
  OutFrame frame = make_frame(header);
  frame.payload = {PutPiece{payload, length}};
  to.send(std::move(frame));
}

std::byte* TcpTransport::payload_target(TcpPair& from, const wire::DataHeader& header,
                                        std::string& error, std::shared_ptr<void>& keep_alive) {
  std::string problem;
  switch (header.kind()) {
    case wire::PUT:
    case wire::GET_REQUEST:
    case wire::ATOMIC_ADD:
    case wire::FETCH_ADD:
      problem = buffer_.check(header);
      if (problem.empty() && header.kind() == wire::PUT) return buffer_.put_target(header);
      break;
    case wire::GET_REPLY: {
      std::lock_guard lock(pending_mutex_);
      auto it = pending_.find(header.token());
      if (it == pending_.end()) return nullptr;  // its waiter gave up: the bytes are dropped
      if (it->second->data.size() != header.length()) {
        problem = "GET_REPLY of " + std::to_string(header.length()) + " bytes for a get of " +
                  std::to_string(it->second->data.size());
        break;
      }
      keep_alive = it->second;
      return it->second->data.data();
    }
    case wire::FETCH_ADD_REPLY:
    case wire::FLUSH:
    case wire::FLUSH_REPLY:
      break;
    default:
      problem = "unknown data frame kind " + std::to_string(static_cast<int>(header.kind()));
  }
  if (!problem.empty()) {
    error = wire::DataKind_Name(header.kind()) + " refused: " + problem;
    spdlog::error("node {}: data connection {} from node {} ({}): {}; closing the connection",
                  node_, from.index(), from.peer_node(), from.peer_name(), error);
  }
  return nullptr;
}

void TcpTransport::frame_complete(TcpPair& from, const wire::DataHeader& header) {
  if (header.kind() == wire::PUT || header.kind() == wire::GET_REPLY) {
    traffic_.received(from.peer_node(), header.length());
  } else if (header.kind() == wire::ATOMIC_ADD || header.kind() == wire::FETCH_ADD) {
    traffic_.received(from.peer_node(), 8);
  }
  switch (header.kind()) {
    case wire::PUT:
      buffer_.complete_put(header);
      doorbell_.ring();
      break;
    case wire::ATOMIC_ADD:
      buffer_.atomic_add(header);
      doorbell_.ring();
      break;
    case wire::FETCH_ADD: {
      wire::DataHeader answer;
      answer.set_kind(wire::FETCH_ADD_REPLY);
      answer.set_token(header.token());
      answer.set_value(buffer_.fetch_add(header));
      doorbell_.ring();
      reply(from, answer, nullptr, 0);
      break;
    }
    case wire::GET_REQUEST:
      from.send(buffer_.get_reply(header));
      break;
    case wire::FLUSH: {
      wire::DataHeader answer;
      answer.set_kind(wire::FLUSH_REPLY);
      answer.set_token(header.token());
      reply(from, answer, nullptr, 0);
      break;
    }
    case wire::GET_REPLY:
    case wire::FETCH_ADD_REPLY:
    case wire::FLUSH_REPLY: {
      std::shared_ptr<Pending> pending;
      {
        std::lock_guard lock(pending_mutex_);
        auto it = pending_.find(header.token());
        if (it == pending_.end()) return;
        pending = it->second;
        pending_.erase(it);
      }
      pending->value = header.value();
      pending->completion->state.store(1, std::memory_order_release);
      doorbell_.ring();
      break;
    }
    default:
      break;
  }
}

void TcpTransport::connection_lost(TcpPair& connection, const std::string& why) {
  const int peer = connection.peer_node();
  bool pair_connection = false;
  {
    std::lock_guard lock(mutex_);
    std::erase_if(all_connections_, [&](const auto& c) { return c.get() == &connection; });
    publish_polled();
    auto& row = connections_[peer];
    pair_connection =
        connection.index() < row.size() && row[connection.index()].get() == &connection;
  }
  const bool peer_lost = pair_connection && health_.mark_down(peer, why);
  if (stopping_.load() || closing_expected_.load()) return;
  if (!peer_lost) {
    spdlog::warn("node {}: {} (not one of the pair's connections; the peer stays up)", node_, why);
    return;
  }
  spdlog::error("node {}: {}; node {} marked down", node_, why, peer);
  {
    std::lock_guard lock(pending_mutex_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second->node == peer) {
        it->second->completion->error = describe_node(peer) + " is down: " + why;
        it->second->completion->state.store(2, std::memory_order_release);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  doorbell_.ring();
  health_.announce(peer, why);
}

}  // namespace symmesh
