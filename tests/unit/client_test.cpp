// The client library against a daemon that goes away: what the user is told names the daemon
// and the step it was lost at, so a script can tell it from a refused or failed job.
#include "client/client.h"

#include <gtest/gtest.h>

#include <future>

#include "common/errors.h"
#include "transport/auth.h"
#include "transport/channel.h"

namespace symmesh {
namespace {

constexpr auto kIo = std::chrono::seconds(10);

// A daemon that accepts, reads the client's hello and closes the connection unanswered, as
// one that is killed mid-handshake or turns a connection away at its cap does.
TEST(Client, ADaemonLostDuringTheHandshakeIsNamed) {
  Listener listener(HostPort{"127.0.0.1", 0});
  auto daemon = std::async(std::launch::async, [&] {
    auto channel = listener.accept(deadline_after(kIo));
    ASSERT_NE(channel, nullptr);
    wire::AuthHello hello;
    channel->read(hello, deadline_after(kIo), kMaxHandshakeFrame);
    EXPECT_EQ(hello.role(), wire::ROLE_CONTROL);
  });
  try {
    Client::connect(listener.local_endpoint(), "a-secret-of-sixteen-bytes", "the test",
                    deadline_after(kIo));
    ADD_FAILURE() << "connect succeeded against a daemon that never answered";
  } catch (const PeerError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("lost the daemon at " + listener.local_endpoint().str()), std::string::npos)
        << what;
    EXPECT_NE(what.find("during the handshake"), std::string::npos) << what;
  }
  daemon.get();
}

}  // namespace
}  // namespace symmesh
