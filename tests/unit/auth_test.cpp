#include "transport/auth.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <future>

#include "common/errors.h"
#include "transport/secret_file.h"

namespace symmesh {
namespace {

const std::string kSecret = "0123456789abcdef-cluster-secret";
const AuthIdentity kServer{wire::ROLE_CONTROL, 0, 1000, 0};
const AuthIdentity kClient{wire::ROLE_CONTROL, 1, 2000, 0};

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

struct Outcome {
  std::string client_error;
  std::string server_error;
  std::string server_kind;
  wire::AuthHello client_saw;  // the server's identity
  wire::AuthHello server_saw;  // the client's identity
};

// Runs both sides over a real connection.
Outcome handshake(const std::string& client_secret, const std::string& server_secret,
                  AuthIdentity client = kClient) {
  Pair pair = connected_pair();
  const auto deadline = deadline_after(std::chrono::seconds(10));
  Outcome out;
  auto server = std::async(std::launch::async, [&] {
    try {
      out.server_saw = authenticate_server(*pair.server, server_secret, kServer, deadline);
    } catch (const AuthError& e) {
      out.server_error = e.what();
      out.server_kind = e.kind();
    } catch (const std::exception& e) {
      out.server_error = e.what();
    }
  });
  try {
    out.client_saw = authenticate_client(*pair.client, client_secret, client, deadline);
  } catch (const std::exception& e) {
    out.client_error = e.what();
  }
  server.get();
  return out;
}

TEST(Auth, SameSecretSucceedsAndEachSideLearnsTheOthersIdentity) {
  const Outcome out = handshake(kSecret, kSecret);
  EXPECT_EQ(out.client_error, "");
  EXPECT_EQ(out.server_error, "");
  EXPECT_EQ(out.server_saw.node_rank(), 1u);
  EXPECT_EQ(out.server_saw.incarnation(), 2000u);
  EXPECT_EQ(out.client_saw.incarnation(), 1000u);
}

TEST(Auth, WrongSecretIsRefusedOnBothSidesAndCountedAsAuth) {
  const Outcome out = handshake("a-wrong-secret-of-enough-bytes", kSecret);
  EXPECT_NE(out.client_error.find("secret mismatch"), std::string::npos) << out.client_error;
  EXPECT_NE(out.server_error.find("secret mismatch"), std::string::npos) << out.server_error;
  EXPECT_EQ(out.server_kind, "auth");
}

TEST(Auth, RoleMismatchIsRefusedNamingBothRolesAsABadRequest) {
  const Outcome out = handshake(kSecret, kSecret, AuthIdentity{wire::ROLE_DATA, 1, 2000, 0});
  EXPECT_NE(out.server_error.find("serves control connections, the client is data"),
            std::string::npos)
      << out.server_error;
  EXPECT_NE(out.client_error.find("role mismatch"), std::string::npos) << out.client_error;
  EXPECT_EQ(out.server_kind, "bad_request");
}

// The server side of a handshake in the background: its error ("" when it succeeded).
std::future<std::string> server_error(BlockingChannel& channel, Deadline deadline) {
  return std::async(std::launch::async, [&channel, deadline]() -> std::string {
    try {
      authenticate_server(channel, kSecret, kServer, deadline);
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  });
}

// An older peer sends its hello first, as this version does: the answer names both versions
// and carries no nonce and nothing derived from the secret.
TEST(Auth, AnOlderVersionIsRefusedNamingBothVersions) {
  Pair pair = connected_pair();
  const auto deadline = deadline_after(std::chrono::seconds(10));
  auto server = server_error(*pair.server, deadline);
  wire::AuthHello old;
  old.set_protocol_version(kProtocolVersion - 1);
  old.set_nonce(std::string(32, 'x'));
  pair.client->write(old, deadline);
  wire::AuthHello answer;
  pair.client->read(answer, deadline);
  EXPECT_EQ(answer.protocol_version(), kProtocolVersion);
  EXPECT_TRUE(answer.nonce().empty());
  const std::string skew = "speaks " + std::to_string(kProtocolVersion) + ", the peer " +
                           std::to_string(kProtocolVersion - 1);
  EXPECT_NE(answer.refusal().find(skew), std::string::npos) << answer.refusal();
  EXPECT_NE(server.get().find("protocol version mismatch"), std::string::npos);
}

// Before authentication a frame is at most kMaxHandshakeFrame: a peer cannot make the
// server allocate from a length it sent.
TEST(Auth, AnOversizedFrameBeforeAuthenticationIsRefusedUnread) {
  Pair pair = connected_pair();
  const auto deadline = deadline_after(std::chrono::seconds(10));
  auto server = server_error(*pair.server, deadline);
  char prefix[kLengthPrefixBytes];
  write_length_prefix(kMaxHandshakeFrame + 1, prefix);
  pair.client->write_raw(std::string(prefix, sizeof(prefix)), deadline);
  EXPECT_NE(server.get().find("outside the allowed 1..4096 bytes"), std::string::npos);
}

// What the server sends before the client has proved itself: a hello, which holds no MAC.
// The attack that broke version 1: a client without the secret opens two connections and
// hands each the other's challenge and whatever proof came back. Here it gets nothing to
// hand over, so every proof it can send is refused.
TEST(Auth, ReflectingTheServersChallengesBetweenTwoConnectionsProvesNothing) {
  ServerHandshake first(kSecret, kServer);
  ServerHandshake second(kSecret, kServer);
  wire::AuthHello probe;
  probe.set_protocol_version(kProtocolVersion);
  probe.set_role(wire::ROLE_CONTROL);
  probe.set_nonce(std::string(32, 'a'));
  const auto first_hello = first.on_client_hello(probe).reply;
  wire::AuthHello reflected = first_hello;  // the server's own challenge, as the client's
  const auto second_hello = second.on_client_hello(reflected).reply;
  for (const auto& bytes : {first_hello.nonce(), second_hello.nonce(), std::string(32, '\0')}) {
    wire::AuthProof proof;
    proof.set_mac(bytes);
    EXPECT_FALSE(first.on_client_proof(proof).reply.ok());
  }
  EXPECT_TRUE(first_hello.refusal().empty());
}

// The server's proof and the client's differ for the same connection (the direction is in
// the MAC), and neither is good on another connection (both nonces are).
TEST(Auth, AProofIsGoodForOneDirectionOfOneConnectionOnly) {
  ClientHandshake client(kSecret, kClient);
  ServerHandshake server(kSecret, kServer);
  const auto hello = server.on_client_hello(client.hello());
  const wire::AuthProof proof = client.on_server_hello(hello.reply);
  const auto result = server.on_client_proof(proof);
  ASSERT_TRUE(result.reply.ok());
  EXPECT_NE(result.reply.mac(), proof.mac());
  EXPECT_EQ(client.on_result(result.reply).incarnation(), kServer.incarnation);

  // Replayed on a new connection (a new server nonce): refused.
  ServerHandshake again(kSecret, kServer);
  again.on_client_hello(client.hello());
  EXPECT_FALSE(again.on_client_proof(proof).reply.ok());
  // The server's own proof handed back to it as a client's: refused.
  ServerHandshake mirror(kSecret, kServer);
  mirror.on_client_hello(client.hello());
  wire::AuthProof reflected;
  reflected.set_mac(result.reply.mac());
  EXPECT_FALSE(mirror.on_client_proof(reflected).reply.ok());
}

// The identity is in the proof: a proof made for node 1 does not pass for node 2.
TEST(Auth, AProofForOneIdentityDoesNotPassForAnother) {
  ClientHandshake honest(kSecret, kClient);
  ServerHandshake server(kSecret, kServer);
  wire::AuthHello claimed = honest.hello();
  claimed.set_node_rank(2);
  const auto hello = server.on_client_hello(claimed);
  const wire::AuthProof proof = honest.on_server_hello(hello.reply);
  EXPECT_FALSE(server.on_client_proof(proof).reply.ok());
}

TEST(Auth, AForgedServerProofIsRefusedByTheClient) {
  ClientHandshake client(kSecret, kClient);
  ServerHandshake server("another-secret-of-enough-bytes", kServer);
  client.on_server_hello(server.on_client_hello(client.hello()).reply);
  wire::AuthResult forged;
  forged.set_ok(true);
  forged.set_mac(std::string(32, 'z'));
  EXPECT_THROW(client.on_result(forged), AuthError);
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

std::string secret_file(const std::string& content, mode_t mode) {
  char path[] = "/tmp/symmesh-secret-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, content.data(), content.size()), ssize_t(content.size()));
  close(fd);
  chmod(path, mode);
  return path;
}

std::string secret_error(const std::string& path) {
  try {
    read_secret_file(path);
    return "";
  } catch (const InvalidArgument& e) {
    return e.what();
  }
}

TEST(SecretFile, AGoodFileIsReadWithoutItsTrailingNewline) {
  const std::string path = secret_file(kSecret + "\n", 0600);
  EXPECT_EQ(read_secret_file(path), kSecret);
  unlink(path.c_str());
}

TEST(SecretFile, GroupOrOthersAccessIsRefusedSayingHowToFixIt) {
  for (mode_t mode : {0644, 0666, 0640, 0620, 0602}) {
    const std::string path = secret_file(kSecret, mode);
    const std::string error = secret_error(path);
    EXPECT_NE(error.find("group or others may read or write it"), std::string::npos) << error;
    EXPECT_NE(error.find("chmod 600"), std::string::npos) << error;
    unlink(path.c_str());
  }
}

TEST(SecretFile, AShortOrMissingSecretIsRefusedSayingHowToMakeOne) {
  for (const std::string& content : {std::string("x"), std::string("\n"), std::string(15, 's')}) {
    const std::string path = secret_file(content, 0600);
    const std::string error = secret_error(path);
    EXPECT_NE(error.find("at least 16"), std::string::npos) << error;
    EXPECT_NE(error.find("head -c 32 /dev/urandom"), std::string::npos) << error;
    unlink(path.c_str());
  }
  EXPECT_NE(secret_error("/nonexistent/secret").find("cannot read secret file"), std::string::npos);
}

}  // namespace
}  // namespace symmesh
