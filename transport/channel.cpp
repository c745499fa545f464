#include "transport/channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "common/errors.h"
#include "transport/frame.h"

namespace symmesh {
namespace {

constexpr auto kRunSlice = std::chrono::milliseconds(50);

using GenericEndpoint = asio::generic::stream_protocol::endpoint;

// A TCP endpoint read back from the generic one the socket reports.
asio::ip::tcp::endpoint tcp_endpoint(const GenericEndpoint& generic) {
  asio::ip::tcp::endpoint endpoint;
  std::memcpy(endpoint.data(), generic.data(), std::min(generic.size(), endpoint.capacity()));
  endpoint.resize(generic.size());
  return endpoint;
}

bool is_tcp(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  return address.ss_family == AF_INET || address.ss_family == AF_INET6;
}

}  // namespace

asio::ip::address resolve_address(const std::string& host) {
  asio::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (!ec) return address;
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  auto results = resolver.resolve(host, "", ec);
  if (ec || results.empty()) {
    throw InvalidArgument("cannot resolve host '" + host + "': " + ec.message());
  }
  return results.begin()->endpoint().address();
}

Deadline no_deadline() {
  return Deadline::max();
}

HostPort parse_host_port(const std::string& text, std::string_view what) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
    throw InvalidArgument(std::string(what) + ": '" + text + "' is not HOST:PORT");
  }
  HostPort out;
  out.host = text.substr(0, colon);
  if (out.host.size() > 2 && out.host.front() == '[' && out.host.back() == ']') {
    out.host = out.host.substr(1, out.host.size() - 2);
  }
  const std::string port = text.substr(colon + 1);
  size_t used = 0;
  unsigned long value = 0;
  try {
    value = std::stoul(port, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != port.size() || value > 65535) {
    throw InvalidArgument(std::string(what) + ": port '" + port + "' is not in 0..65535");
  }
  out.port = static_cast<uint16_t>(value);
  return out;
}

BlockingChannel::BlockingChannel() : socket_(io_) {}

BlockingChannel::~BlockingChannel() {
  close();
}

void BlockingChannel::close() {
  asio::error_code ignored;
  if (socket_.is_open()) {
    socket_.shutdown(asio::socket_base::shutdown_both, ignored);
    socket_.close(ignored);
  }
}

int BlockingChannel::release_native() {
  return socket_.release();
}

std::unique_ptr<BlockingChannel> BlockingChannel::duplicate() {
  const int fd = ::dup(socket_.native_handle());
  if (fd < 0) throw PeerError("cannot duplicate the connection to " + peer_name_);
  return adopt(fd, peer_name_);
}

HostPort BlockingChannel::local_endpoint() const {
  const auto ep = tcp_endpoint(socket_.local_endpoint());
  return HostPort{ep.address().to_string(), ep.port()};
}

void BlockingChannel::run_until_done(bool& done, Deadline deadline, std::string_view what) {
  io_.restart();
  while (!done) {
    const auto now = Clock::now();
    const bool stop = stopped_.load();
    if (stop || now >= deadline) {
      asio::error_code ignored;
      socket_.cancel(ignored);
      io_.restart();
      io_.run();  // let the cancelled handler run
      if (stop) throw PeerError(std::string(what) + " " + peer_name_ + ": channel stopped");
      throw TimeoutError(std::string(what) + " " + peer_name_ + ": deadline passed");
    }
    io_.run_for(std::min<Clock::duration>(deadline - now, kRunSlice));
    if (io_.stopped()) io_.restart();
  }
}

std::unique_ptr<BlockingChannel> BlockingChannel::connect(const HostPort& to, Deadline deadline) {
  std::unique_ptr<BlockingChannel> channel(new BlockingChannel());
  channel->peer_name_ = to.str();
  for (int attempt = 0;; ++attempt) {
    // Resolved on every try: a peer's name may not be in DNS yet (a Kubernetes pod that is
    // still being created), just as its port may not be open yet.
    std::string problem;
    asio::error_code result;
    try {
      const GenericEndpoint endpoint(asio::ip::tcp::endpoint(resolve_address(to.host), to.port));
      bool done = false;
      channel->socket_.async_connect(endpoint, [&](const asio::error_code& ec) {
        result = ec;
        done = true;
      });
      channel->run_until_done(done, deadline, "connecting to");
      if (!result) break;
      asio::error_code ignored;
      channel->socket_.close(ignored);
      problem = result.message();
    } catch (const InvalidArgument& e) {
      problem = e.what();
    }
    const bool retryable = result == asio::error::connection_refused ||
                           result == asio::error::connection_reset ||
                           result == asio::error::timed_out || !result;  // !result: unresolved
    // The peer may still be starting: back off briefly, and stop (with the peer's answer, not
    // a bare deadline) when the next try would start too late.
    const auto backoff = std::chrono::milliseconds(std::min(20 * (attempt + 1), 200));
    if (!retryable || Clock::now() + backoff + std::chrono::milliseconds(20) >= deadline) {
      throw PeerError("cannot connect to " + to.str() + ": " + problem + " (after " +
                      std::to_string(attempt + 1) + " attempts)");
    }
    std::this_thread::sleep_for(backoff);
  }
  channel->socket_.set_option(asio::ip::tcp::no_delay(true));
  return channel;
}

std::unique_ptr<BlockingChannel> BlockingChannel::connect(const LocalPath& to, Deadline deadline) {
  std::unique_ptr<BlockingChannel> channel(new BlockingChannel());
  channel->peer_name_ = to.path;
  bool done = false;
  asio::error_code result;
  channel->socket_.async_connect(GenericEndpoint(asio::local::stream_protocol::endpoint(to.path)),
                                 [&](const asio::error_code& ec) {
                                   result = ec;
                                   done = true;
                                 });
  channel->run_until_done(done, deadline, "connecting to");
  if (result) throw PeerError("cannot connect to " + to.path + ": " + result.message());
  return channel;
}

std::unique_ptr<BlockingChannel> BlockingChannel::adopt(int native_fd, std::string peer_name) {
  std::unique_ptr<BlockingChannel> channel(new BlockingChannel());
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  getsockname(native_fd, reinterpret_cast<sockaddr*>(&address), &length);
  channel->socket_.assign(asio::generic::stream_protocol(address.ss_family, SOCK_STREAM),
                          native_fd);
  if (is_tcp(native_fd)) channel->socket_.set_option(asio::ip::tcp::no_delay(true));
  channel->peer_name_ = std::move(peer_name);
  return channel;
}

void BlockingChannel::when_ready(asio::socket_base::wait_type wait, const std::function<bool()>& io,
                                 Deadline deadline, std::string_view what) {
  for (;;) {
    bool done = false;
    asio::error_code result;
    socket_.async_wait(wait, [&](const asio::error_code& ec) {
      result = ec;
      done = true;
    });
    run_until_done(done, deadline, what);
    if (result) throw PeerError(std::string(what) + " " + peer_name_ + ": " + result.message());
    if (io()) return;
  }
}

void BlockingChannel::send_fds(const std::vector<int>& fds, Deadline deadline) {
  char byte = 'F';
  iovec data{&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  when_ready(
      asio::socket_base::wait_write,
      [&] {
        const ssize_t sent = ::sendmsg(socket_.native_handle(), &message, MSG_NOSIGNAL);
        if (sent == 1) return true;
        if (sent < 0 && (errno == EAGAIN || errno == EINTR)) return false;
        throw PeerError("passing descriptors to " + peer_name_ + ": " + std::strerror(errno));
      },
      deadline, "passing descriptors to");
}

std::vector<int> BlockingChannel::receive_fds(size_t max, Deadline deadline) {
  char byte = 0;
  iovec data{&byte, 1};
  std::vector<char> control(CMSG_SPACE(sizeof(int) * max));
  msghdr message{};
  std::vector<int> fds;
  when_ready(
      asio::socket_base::wait_read,
      [&] {
        message = msghdr{};
        message.msg_iov = &data;
        message.msg_iovlen = 1;
        message.msg_control = control.data();
        message.msg_controllen = control.size();
        const ssize_t got = ::recvmsg(socket_.native_handle(), &message, MSG_CMSG_CLOEXEC);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) return false;
        if (got <= 0) throw PeerError("connection closed by " + peer_name_ + " before descriptors");
        return true;
      },
      deadline, "receiving descriptors from");
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    const int* passed = reinterpret_cast<const int*>(CMSG_DATA(header));
    for (size_t i = 0; i < count; ++i) fds.push_back(passed[i]);
  }
  if ((message.msg_flags & MSG_CTRUNC) || fds.size() > max) {
    for (const int fd : fds) ::close(fd);
    throw PeerError(peer_name_ + " passed more than " + std::to_string(max) + " descriptors");
  }
  return fds;
}

BlockingChannel::PeerState BlockingChannel::peer_state() {
  pollfd watch{socket_.native_handle(), POLLIN | POLLRDHUP, 0};
  if (::poll(&watch, 1, 0) <= 0) return PeerState::kOpen;  // nothing, or poll itself failed
  if (watch.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return PeerState::kClosed;
  return PeerState::kSpoke;
}

PeerCredentials BlockingChannel::peer_credentials() {
  ucred credentials{};
  socklen_t length = sizeof(credentials);
  if (getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    throw PeerError("cannot read the credentials of " + peer_name_ + ": " + std::strerror(errno));
  }
  return {int(credentials.pid), unsigned(credentials.uid), unsigned(credentials.gid)};
}

void BlockingChannel::write(const google::protobuf::MessageLite& message, Deadline deadline) {
  write_raw(encode_frame(message), deadline);
}

void BlockingChannel::write_raw(std::string_view bytes, Deadline deadline) {
  bool done = false;
  asio::error_code result;
  asio::async_write(socket_, asio::buffer(bytes), [&](const asio::error_code& ec, size_t) {
    result = ec;
    done = true;
  });
  run_until_done(done, deadline, "writing to");
  if (result) throw PeerError("writing to " + peer_name_ + ": " + result.message());
}

void BlockingChannel::read(google::protobuf::MessageLite& message, Deadline deadline,
                           uint32_t cap) {
  char prefix[kLengthPrefixBytes];
  std::string body;
  bool done = false;
  asio::error_code result;
  asio::async_read(socket_, asio::buffer(prefix), [&](const asio::error_code& ec, size_t) {
    result = ec;
    done = true;
  });
  run_until_done(done, deadline, "reading from");
  if (result == asio::error::eof) throw PeerError("connection closed by " + peer_name_);
  if (result) throw PeerError("reading from " + peer_name_ + ": " + result.message());
  const uint32_t length = read_length_prefix(prefix);
  check_frame_length(length, cap, message.GetTypeName(), peer_name_);
  body.resize(length);
  done = false;
  asio::async_read(socket_, asio::buffer(body), [&](const asio::error_code& ec, size_t) {
    result = ec;
    done = true;
  });
  run_until_done(done, deadline, "reading from");
  if (result) throw PeerError("reading from " + peer_name_ + ": " + result.message());
  parse_frame_body(message, body, peer_name_);
}

Listener::Listener(const HostPort& at) : acceptor_(io_) {
  listen(GenericEndpoint(asio::ip::tcp::endpoint(resolve_address(at.host), at.port)), at.str());
}

Listener::Listener(const LocalPath& at, unsigned mode) : acceptor_(io_) {
  listen(GenericEndpoint(asio::local::stream_protocol::endpoint(at.path)), at.path);
  if (::chmod(at.path.c_str(), mode) != 0) {
    throw InvalidArgument("cannot set the mode of " + at.path + ": " + std::strerror(errno));
  }
}

void Listener::listen(const GenericEndpoint& at, const std::string& name) {
  asio::error_code ec;
  acceptor_.open(at.protocol(), ec);
  if (!ec && at.protocol().family() != AF_UNIX) {
    acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
  }
  if (!ec) acceptor_.bind(at, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw InvalidArgument("cannot listen on " + name + ": " + ec.message());
}

HostPort Listener::local_endpoint() const {
  const auto ep = tcp_endpoint(acceptor_.local_endpoint());
  return HostPort{ep.address().to_string(), ep.port()};
}

std::unique_ptr<BlockingChannel> Listener::accept(Deadline deadline) {
  asio::generic::stream_protocol::socket socket(io_);
  bool done = false;
  asio::error_code result;
  acceptor_.async_accept(socket, [&](const asio::error_code& ec) {
    result = ec;
    done = true;
  });
  io_.restart();
  while (!done) {
    const auto now = Clock::now();
    if (stopped_.load() || now >= deadline) {
      acceptor_.cancel();
      io_.restart();
      io_.run();
      return nullptr;
    }
    io_.run_for(std::min<Clock::duration>(deadline - now, kRunSlice));
    if (io_.stopped()) io_.restart();
  }
  if (result) return nullptr;
  std::string peer = "a local process";
  if (is_tcp(socket.native_handle())) {
    asio::error_code ec;
    const auto remote = tcp_endpoint(socket.remote_endpoint(ec));
    peer = ec ? "unknown peer" : remote.address().to_string() + ":" + std::to_string(remote.port());
  }
  return BlockingChannel::adopt(socket.release(), peer);
}

}  // namespace symmesh
