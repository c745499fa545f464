// The handshake that opens every connection: both sides prove they know the cluster
// secret (HMAC-SHA256 over both nonces, OpenSSL libcrypto) and agree on the protocol version
// and the connection's role before any other message is accepted.
#pragma once

#include <string>

#include "auth.pb.h"
#include "transport/channel.h"

namespace symmesh {

inline constexpr uint32_t kProtocolVersion = 1;

struct AuthIdentity {
  std::string role;  // "bootstrap", "control" or "data"
  uint32_t node_rank = 0;
  uint32_t connection_index = 0;
};

// Runs the handshake on a freshly connected channel; returns the peer's hello. Throws
// AuthError (secret or version mismatch, wrong role: the message names which) after telling
// the peer why.
wire::AuthHello authenticate(BlockingChannel& channel, const std::string& secret,
                             const AuthIdentity& me, Deadline deadline);

std::string hmac_sha256(const std::string& key, const std::string& data);

// Reads a secret file (trailing newlines dropped). Throws InvalidArgument naming the file.
std::string read_secret_file(const std::string& path);

}  // namespace symmesh
