#include "transport/auth.h"

#include <gtest/gtest.h>

#include <future>

namespace symmesh {
namespace {

struct Pair {
  std::unique_ptr<BlockingChannel> client;
  std::unique_ptr<BlockingChannel> server;
};

Pair connected_pair() {
  Listener listener(HostPort{"127.0.0.1", 0});
  auto accepted = std::async(std::launch::async, [&] {
    return listener.accept(deadline_after(std::chrono::seconds(10)));
  });
  Pair pair;
  pair.client =
      BlockingChannel::connect(listener.local_endpoint(), deadline_after(std::chrono::seconds(10)));
  pair.server = accepted.get();
  EXPECT_NE(pair.server, nullptr);
  return pair;
}

// Runs both sides; returns the error each side saw (empty when it succeeded).
std::pair<std::string, std::string> handshake(const std::string& client_secret,
                                              const std::string& server_secret,
                                              const std::string& client_role = "control") {
  Pair pair = connected_pair();
  const auto deadline = deadline_after(std::chrono::seconds(10));
  auto server = std::async(std::launch::async, [&]() -> std::string {
    try {
      authenticate(*pair.server, server_secret, AuthIdentity{"control", 0, 0}, deadline);
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  });
  std::string client_error;
  try {
    authenticate(*pair.client, client_secret, AuthIdentity{client_role, 1, 0}, deadline);
  } catch (const std::exception& e) {
    client_error = e.what();
  }
  return {client_error, server.get()};
}

TEST(Auth, SameSecretSucceedsOnBothSides) {
  auto [client, server] = handshake("s3cret", "s3cret");
  EXPECT_EQ(client, "");
  EXPECT_EQ(server, "");
}

TEST(Auth, WrongSecretIsRefusedOnBothSidesNamingTheSecret) {
  auto [client, server] = handshake("wrong", "s3cret");
  EXPECT_NE(client.find("secret mismatch"), std::string::npos) << client;
  EXPECT_NE(server.find("secret mismatch"), std::string::npos) << server;
}

TEST(Auth, RoleMismatchIsRefusedNamingTheRole) {
  auto [client, server] = handshake("s3cret", "s3cret", "data");
  EXPECT_NE(server.find("role mismatch"), std::string::npos) << server;
  EXPECT_NE(client.find("role"), std::string::npos) << client;
}

TEST(Auth, VersionSkewIsRefusedNamingTheField) {
  Pair pair = connected_pair();
  const auto deadline = deadline_after(std::chrono::seconds(10));
  auto server = std::async(std::launch::async, [&]() -> std::string {
    try {
      authenticate(*pair.server, "s", AuthIdentity{"control", 0, 0}, deadline);
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  });
  wire::AuthHello hello;
  hello.set_protocol_version(kProtocolVersion + 1);
  hello.set_nonce(std::string(32, 'x'));
  hello.set_role("control");
  pair.client->write(hello, deadline);
  wire::AuthHello theirs;
  pair.client->read(theirs, deadline);
  wire::AuthProof proof;
  proof.set_mac("not checked once the version differs");
  pair.client->write(proof, deadline);
  wire::AuthProof their_proof;
  pair.client->read(their_proof, deadline);
  wire::AuthResult result;
  pair.client->read(result, deadline);
  EXPECT_FALSE(result.ok());
  EXPECT_NE(result.error().find("protocol_version"), std::string::npos) << result.error();
  pair.client->write(result, deadline);
  EXPECT_NE(server.get().find("protocol_version"), std::string::npos);
}

// A name that does not resolve is retried like a refused port (a peer's DNS name may come
// late) until the deadline, and the error says which name.
TEST(Connect, AnUnresolvedNameIsRetriedUntilTheDeadlineAndNamed) {
  const auto start = Clock::now();
  try {
    BlockingChannel::connect(HostPort{"no-such-host.invalid", 7400},
                             deadline_after(std::chrono::milliseconds(600)));
    FAIL() << "connected to no-such-host.invalid";
  } catch (const PeerError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot resolve host 'no-such-host.invalid'"), std::string::npos) << what;
    // How many tries fit depends on how fast this host's resolver says no.
    EXPECT_NE(what.find(" attempts)"), std::string::npos) << what;
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(30));
}

TEST(Auth, HmacMatchesAKnownVector) {
  // RFC 4231 test case 2.
  const std::string mac = hmac_sha256("Jefe", "what do ya want for nothing?");
  const unsigned char expected[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e};
  ASSERT_EQ(mac.size(), 32u);
  EXPECT_EQ(std::memcmp(mac.data(), expected, sizeof(expected)), 0);
}

}  // namespace
}  // namespace symmesh
