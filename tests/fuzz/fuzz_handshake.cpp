// libFuzzer: the handshake and hello messages as an unauthenticated peer can send them. The
// input holds up to four frames: a client hello and proof against a server, then a server
// hello and result against a client, and a bootstrap NodeHello checked against a root's.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "common/errors.h"
#include "daemon/bootstrap.h"
#include "transport/auth.h"
#include "transport/frame.h"
#include "wire/bootstrap.pb.h"

namespace {

// Splits the input at length prefixes; a short or oversized part ends the list.
std::vector<std::string_view> frames(std::string_view stream) {
  std::vector<std::string_view> out;
  while (out.size() < 5 && stream.size() >= symmesh::kLengthPrefixBytes) {
    const uint32_t length = symmesh::read_length_prefix(stream.data());
    stream.remove_prefix(symmesh::kLengthPrefixBytes);
    if (length > stream.size() || length > symmesh::kMaxHandshakeFrame) break;
    out.push_back(stream.substr(0, length));
    stream.remove_prefix(length);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace symmesh;
  const auto parts = frames(std::string_view(reinterpret_cast<const char*>(data), size));
  const std::string secret = "fuzzing-secret-0123456789";
  const AuthIdentity server_id{wire::ROLE_CONTROL, 0, 1, 0};
  try {
    ServerHandshake server(secret, server_id);
    wire::AuthHello hello;
    if (parts.size() > 0 && hello.ParseFromArray(parts[0].data(), int(parts[0].size()))) {
      const auto step = server.on_client_hello(hello);
      wire::AuthProof proof;
      if (step.refused.empty() && parts.size() > 1 &&
          proof.ParseFromArray(parts[1].data(), int(parts[1].size()))) {
        // Without the secret no proof can pass.
        if (server.on_client_proof(proof).reply.ok() && proof.mac().size() != 32) __builtin_trap();
      }
    }
  } catch (const Error&) {
  }
  try {
    ClientHandshake client(secret, AuthIdentity{wire::ROLE_CONTROL, 0, 0, 0});
    wire::AuthHello hello;
    wire::AuthResult result;
    if (parts.size() > 2 && hello.ParseFromArray(parts[2].data(), int(parts[2].size()))) {
      client.on_server_hello(hello);
      if (parts.size() > 3 && result.ParseFromArray(parts[3].data(), int(parts[3].size()))) {
        client.on_result(result);
      }
    }
  } catch (const Error&) {
  }
  wire::NodeHello root, joining;
  root.set_protocol_version(kProtocolVersion);
  root.set_nodes(4);
  root.set_ranks_per_node(2);
  root.set_heap_size(1 << 20);
  root.set_tcp_connections(2);
  if (parts.size() > 4 && joining.ParseFromArray(parts[4].data(), int(parts[4].size()))) {
    check_hello(root, joining);
  }
  return 0;
}
