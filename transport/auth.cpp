#include "transport/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/errors.h"

namespace symmesh {
namespace {

constexpr size_t kNonceBytes = 32;
constexpr char kClientLabel[] = "symmesh-auth client->server";
constexpr char kServerLabel[] = "symmesh-auth server->client";

std::string random_nonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), kNonceBytes) != 1) {
    throw Error("RAND_bytes failed to produce a nonce");
  }
  return nonce;
}

void append_u64(std::string& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

// One side's part of the transcript: fixed-width fields, then the fixed-size nonce, so two
// different hellos can never encode to the same bytes.
void append_hello(std::string& out, const wire::AuthHello& hello) {
  append_u64(out, hello.protocol_version());
  append_u64(out, static_cast<uint64_t>(hello.role()));
  append_u64(out, hello.node_rank());
  append_u64(out, hello.incarnation());
  append_u64(out, hello.connection_index());
  out += hello.nonce();
}

std::string transcript(const wire::AuthHello& client, const wire::AuthHello& server) {
  std::string out;
  append_hello(out, client);
  append_hello(out, server);
  return out;
}

std::string mac(const std::string& secret, const char* label, const std::string& transcript,
                const std::string& extra = {}) {
  return hmac_sha256(secret, std::string(label) + '\0' + transcript + extra);
}

bool same_mac(const std::string& got, const std::string& expected) {
  return got.size() == expected.size() &&
         CRYPTO_memcmp(got.data(), expected.data(), expected.size()) == 0;
}

wire::AuthHello hello_of(const AuthIdentity& me) {
  wire::AuthHello hello;
  hello.set_protocol_version(kProtocolVersion);
  hello.set_nonce(random_nonce());
  hello.set_role(me.role);
  hello.set_node_rank(me.node_rank);
  hello.set_incarnation(me.incarnation);
  hello.set_connection_index(me.connection_index);
  return hello;
}

std::string version_skew(uint32_t theirs) {
  return "protocol version mismatch: this side speaks " + std::to_string(kProtocolVersion) +
         ", the peer " + std::to_string(theirs) + " (run the same symmesh version everywhere)";
}

// Tells the client why before closing; a client already gone changes nothing.
void write_refusal(BlockingChannel& channel, const google::protobuf::MessageLite& refusal,
                   Deadline deadline) {
  try {
    channel.write(refusal, deadline);
  } catch (const Error&) {
  }
}

}  // namespace

std::string role_name(wire::AuthRole role) {
  switch (role) {
    case wire::ROLE_BOOTSTRAP:
      return "bootstrap";
    case wire::ROLE_CONTROL:
      return "control";
    case wire::ROLE_DATA:
      return "data";
    default:
      return "unknown (" + std::to_string(static_cast<int>(role)) + ")";
  }
}

std::string hmac_sha256(const std::string& key, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), out,
           &out_length) == nullptr) {
    throw Error("HMAC-SHA256 failed");
  }
  return std::string(reinterpret_cast<char*>(out), out_length);
}

ClientHandshake::ClientHandshake(const std::string& secret, const AuthIdentity& me)
    : secret_(secret), mine_(hello_of(me)) {}

wire::AuthProof ClientHandshake::on_server_hello(const wire::AuthHello& theirs) {
  if (!theirs.refusal().empty()) {
    throw AuthError("the server refused the handshake: " + theirs.refusal(), "bad_request");
  }
  if (theirs.protocol_version() != kProtocolVersion) {
    throw AuthError(version_skew(theirs.protocol_version()), "bad_request");
  }
  if (theirs.nonce().size() != kNonceBytes) {
    throw AuthError("the server's nonce has " + std::to_string(theirs.nonce().size()) +
                        " bytes (expected " + std::to_string(kNonceBytes) + ")",
                    "bad_request");
  }
  theirs_ = theirs;
  transcript_ = transcript(mine_, theirs_);
  client_mac_ = mac(secret_, kClientLabel, transcript_);
  wire::AuthProof proof;
  proof.set_mac(client_mac_);
  return proof;
}

const wire::AuthHello& ClientHandshake::on_result(const wire::AuthResult& result) {
  if (!result.ok()) throw AuthError("refused by the server: " + result.error());
  if (!same_mac(result.mac(), mac(secret_, kServerLabel, transcript_, client_mac_))) {
    throw AuthError(
        "secret mismatch: the server's proof does not match this side's cluster secret");
  }
  return theirs_;
}

ServerHandshake::ServerHandshake(const std::string& secret, const AuthIdentity& me)
    : secret_(secret), mine_(hello_of(me)) {}

ServerHandshake::Step<wire::AuthHello> ServerHandshake::on_client_hello(
    const wire::AuthHello& theirs) {
  Step<wire::AuthHello> step;
  if (theirs.protocol_version() != kProtocolVersion) {
    step.refused = version_skew(theirs.protocol_version());
  } else if (theirs.role() != mine_.role()) {
    step.refused = "role mismatch: this port serves " + role_name(mine_.role()) +
                   " connections, the client is " + role_name(theirs.role());
  } else if (theirs.nonce().size() != kNonceBytes) {
    step.refused = "nonce of " + std::to_string(theirs.nonce().size()) + " bytes (expected " +
                   std::to_string(kNonceBytes) + ")";
  }
  if (!step.refused.empty()) {
    // A refusal carries the version and the reason, nothing random or derived from the secret.
    step.kind = "bad_request";
    step.reply.set_protocol_version(kProtocolVersion);
    step.reply.set_refusal(step.refused);
    return step;
  }
  theirs_ = theirs;
  transcript_ = transcript(theirs_, mine_);
  step.reply = mine_;
  return step;
}

ServerHandshake::Step<wire::AuthResult> ServerHandshake::on_client_proof(
    const wire::AuthProof& proof) {
  Step<wire::AuthResult> step;
  const std::string expected = mac(secret_, kClientLabel, transcript_);
  if (transcript_.empty() || !same_mac(proof.mac(), expected)) {
    step.refused = "secret mismatch: the client's proof does not match the cluster secret";
    step.kind = "auth";
    step.reply.set_ok(false);
    step.reply.set_error(step.refused);
    return step;
  }
  step.reply.set_ok(true);
  step.reply.set_mac(mac(secret_, kServerLabel, transcript_, proof.mac()));
  return step;
}

wire::AuthHello authenticate_client(BlockingChannel& channel, const std::string& secret,
                                    const AuthIdentity& me, Deadline deadline) {
  deadline = std::min(deadline, deadline_after(kHandshakeTimeout));
  ClientHandshake handshake(secret, me);
  try {
    channel.write(handshake.hello(), deadline);
    wire::AuthHello theirs;
    channel.read(theirs, deadline, kMaxHandshakeFrame);
    channel.write(handshake.on_server_hello(theirs), deadline);
    wire::AuthResult result;
    channel.read(result, deadline, kMaxHandshakeFrame);
    return handshake.on_result(result);
  } catch (const AuthError& e) {
    throw AuthError("authentication with " + channel.peer_name() + " failed: " + e.what(),
                    e.kind());
  }
}

wire::AuthHello authenticate_server(BlockingChannel& channel, const std::string& secret,
                                    const AuthIdentity& me, Deadline deadline) {
  deadline = std::min(deadline, deadline_after(kHandshakeTimeout));
  ServerHandshake handshake(secret, me);
  wire::AuthHello theirs;
  channel.read(theirs, deadline, kMaxHandshakeFrame);
  // Sends a step's reply; a refusal then ends the handshake with the reason.
  const auto answer = [&](const auto& step) {
    if (step.refused.empty()) return channel.write(step.reply, deadline);
    write_refusal(channel, step.reply, deadline);
    throw AuthError("refused " + channel.peer_name() + ": " + step.refused, step.kind);
  };
  answer(handshake.on_client_hello(theirs));
  wire::AuthProof proof;
  channel.read(proof, deadline, kMaxHandshakeFrame);
  answer(handshake.on_client_proof(proof));
  return handshake.client();
}

}  // namespace symmesh
