#include "transport/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>
#include <sstream>

#include "transport/errors.h"

namespace symmesh {
namespace {

constexpr size_t kNonceBytes = 32;

std::string random_nonce() {
  std::string nonce(kNonceBytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), kNonceBytes) != 1) {
    throw Error("RAND_bytes failed to produce a nonce");
  }
  return nonce;
}

// What a side proves: the role, then the prover's nonce, then the verifier's nonce, so a
// proof can never be replayed in the other direction or on another connection.
std::string proof_input(const std::string& role, const std::string& prover_nonce,
                        const std::string& verifier_nonce) {
  return "symmesh-auth-v1\n" + role + "\n" + prover_nonce + verifier_nonce;
}

}  // namespace

std::string hmac_sha256(const std::string& key, const std::string& data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_length = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac,
           &mac_length) == nullptr) {
    throw Error("HMAC-SHA256 failed");
  }
  return std::string(reinterpret_cast<char*>(mac), mac_length);
}

std::string read_secret_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument("cannot read secret file '" + path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string secret = buffer.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.empty()) throw InvalidArgument("secret file '" + path + "' is empty");
  return secret;
}

wire::AuthHello authenticate(BlockingChannel& channel, const std::string& secret,
                             const AuthIdentity& me, Deadline deadline) {
  wire::AuthHello mine;
  mine.set_protocol_version(kProtocolVersion);
  mine.set_nonce(random_nonce());
  mine.set_role(me.role);
  mine.set_node_rank(me.node_rank);
  mine.set_connection_index(me.connection_index);
  channel.write(mine, deadline);

  wire::AuthHello theirs;
  channel.read(theirs, deadline);

  std::string problem;
  if (theirs.protocol_version() != kProtocolVersion) {
    problem = "protocol_version mismatch: ours is " + std::to_string(kProtocolVersion) +
              ", the peer's is " + std::to_string(theirs.protocol_version());
  } else if (theirs.role() != me.role) {
    problem = "role mismatch: this endpoint serves '" + me.role + "' connections, the peer is '" +
              theirs.role() + "'";
  } else if (theirs.nonce().size() != kNonceBytes) {
    problem = "nonce of " + std::to_string(theirs.nonce().size()) + " bytes (expected " +
              std::to_string(kNonceBytes) + ")";
  }

  wire::AuthProof proof;
  proof.set_mac(hmac_sha256(secret, proof_input(me.role, mine.nonce(), theirs.nonce())));
  channel.write(proof, deadline);
  wire::AuthProof their_proof;
  channel.read(their_proof, deadline);
  if (problem.empty()) {
    const std::string expected =
        hmac_sha256(secret, proof_input(me.role, theirs.nonce(), mine.nonce()));
    if (their_proof.mac().size() != expected.size() ||
        CRYPTO_memcmp(their_proof.mac().data(), expected.data(), expected.size()) != 0) {
      problem = "secret mismatch: the peer's proof does not match this node's cluster secret";
    }
  }

  wire::AuthResult result;
  result.set_ok(problem.empty());
  result.set_error(problem);
  channel.write(result, deadline);
  wire::AuthResult their_result;
  channel.read(their_result, deadline);
  if (!problem.empty()) {
    throw AuthError("authentication with " + channel.peer_name() + " failed: " + problem);
  }
  if (!their_result.ok()) {
    throw AuthError("authentication with " + channel.peer_name() +
                    " refused by the peer: " + their_result.error());
  }
  return theirs;
}

}  // namespace symmesh
