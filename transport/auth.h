// The handshake that opens every connection (wire/auth.proto has the message flow): the
// client proves it knows the cluster secret first, then the server; each proof is an
// HMAC-SHA256 (OpenSSL libcrypto) over a transcript that binds the direction, both nonces,
// both sides' role and identity and the protocol version, so a proof taken from one
// connection, or reflected back at its sender, proves nothing.
//
// ClientHandshake and ServerHandshake hold the logic with no I/O, so the blocking channels
// (authenticate_client/server) and the asio control server drive the same steps.
#pragma once

#include <string>

#include "transport/channel.h"
#include "wire/auth.pb.h"

namespace symmesh {

// Version 6: a job's figures are its kind's message (KindFigures) in reports and results.
// Version 5: a node's hello lists its network transports (TransportAddress), in the order
// of preference, where version 4 had tcp's and verbs' fields.
// Version 4: enums in the job and status messages where version 3 had words.
// Version 3: requests relayed from a member to the root as the client's own messages.
// Version 2 brought the directional, identity-bound handshake. Other versions are refused.
inline constexpr uint32_t kProtocolVersion = 6;
// Frames before authentication: a hello, a proof or a result is well under this.
inline constexpr uint32_t kMaxHandshakeFrame = 4096;
inline constexpr auto kHandshakeTimeout = std::chrono::seconds(5);

struct AuthIdentity {
  wire::AuthRole role = wire::ROLE_UNKNOWN;
  uint32_t node_rank = 0;
  uint64_t incarnation = 0;
  uint32_t connection_index = 0;
};

std::string role_name(wire::AuthRole role);

class ClientHandshake {
 public:
  ClientHandshake(const std::string& secret, const AuthIdentity& me);
  const wire::AuthHello& hello() const { return mine_; }
  // The server's hello: returns the proof to send. Throws AuthError for a refusal or a
  // version skew (naming both versions).
  wire::AuthProof on_server_hello(const wire::AuthHello& theirs);
  // The server's result: returns the server's hello (its identity) once its proof checks
  // out. Throws AuthError naming what failed.
  const wire::AuthHello& on_result(const wire::AuthResult& result);

 private:
  const std::string secret_;
  wire::AuthHello mine_;
  wire::AuthHello theirs_;
  std::string transcript_;
  std::string client_mac_;
};

class ServerHandshake {
 public:
  // What to send back, and whether the conversation ends there: `refused` is the reason
  // (and AuthError::kind below says how to count it); empty when it goes on.
  template <typename Message>
  struct Step {
    Message reply;
    std::string refused;
    std::string kind;  // "bad_request" (version, role, nonce) or "auth" (the proof)
  };

  ServerHandshake(const std::string& secret, const AuthIdentity& me);
  Step<wire::AuthHello> on_client_hello(const wire::AuthHello& theirs);
  Step<wire::AuthResult> on_client_proof(const wire::AuthProof& proof);
  const wire::AuthHello& client() const { return theirs_; }

 private:
  const std::string secret_;
  wire::AuthHello mine_;
  wire::AuthHello theirs_;
  std::string transcript_;
};

// Blocking drivers over a fresh channel; each returns the peer's hello (its identity). They
// throw AuthError (a refusal or a wrong proof, with kind() "auth" or "bad_request"),
// PeerError (the peer closed or sent garbage) or TimeoutError (the deadline).
wire::AuthHello authenticate_client(BlockingChannel& channel, const std::string& secret,
                                    const AuthIdentity& me, Deadline deadline);
wire::AuthHello authenticate_server(BlockingChannel& channel, const std::string& secret,
                                    const AuthIdentity& me, Deadline deadline);

std::string hmac_sha256(const std::string& key, const std::string& data);

}  // namespace symmesh
