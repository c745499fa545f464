#include "tests/cluster/held_connections.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "common/descriptor_limit.h"
#include "common/errors.h"

namespace symmesh::testing {
namespace {

sockaddr_in ipv4(const std::string& host, uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (::inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    throw InvalidArgument("not an IPv4 address: " + host);
  }
  return address;
}

}  // namespace

HeldConnections::~HeldConnections() {
  for (const int fd : fds_) ::close(fd);
}

void HeldConnections::open(const HostPort& to, const std::string& source, int count) {
  const sockaddr_in from = ipv4(source, 0), server = ipv4(to.host, to.port);
  for (int i = 0; i < count; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) throw Error(std::string("socket failed: ") + std::strerror(errno));
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&from), sizeof from) != 0 ||
        ::connect(fd, reinterpret_cast<const sockaddr*>(&server), sizeof server) != 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw Error("connection " + std::to_string(i) + " from " + source + " to " + to.str() +
                  " failed: " + why);
    }
    fds_.push_back(fd);
  }
}

void HeldConnections::send(const std::string& bytes) {
  for (const int fd : fds_) {
    [[maybe_unused]] const ssize_t sent =
        ::send(fd, bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
}

namespace {

bool ended_by_server(int fd) {
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

}  // namespace

int HeldConnections::ended() const {
  int ended = 0;
  for (const int fd : fds_) ended += ended_by_server(fd);
  return ended;
}

int HeldConnections::renew(const HostPort& to, const std::string& source) {
  int renewed = 0;
  for (size_t i = 0; i < fds_.size(); ++i) {
    if (!ended_by_server(fds_[i])) continue;
    ::close(fds_[i]);
    fds_.erase(fds_.begin() + long(i--));
    ++renewed;
  }
  open(to, source, renewed);
  return renewed;
}

bool can_hold(int needed) {
  return raise_descriptor_limit() >= uint64_t(needed);
}

}  // namespace symmesh::testing
