// symmeshd's configuration: flags, the same keys in TOML, flags winning over the file, and
// clear errors naming the key and what is allowed.
#include "daemon/config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/errors.h"

namespace symmesh {
namespace {

std::optional<DaemonConfig> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "symmeshd");
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  return parse_daemon_config(static_cast<int>(argv.size()), argv.data());
}

std::string write_file(const std::string& text) {
  char pattern[] = "/tmp/symmesh-config.XXXXXX";
  const int fd = mkstemp(pattern);
  close(fd);
  std::ofstream(pattern) << text;
  return pattern;
}

TEST(DaemonConfig, FlagsWithSuffixedSizesAndDurations) {
  auto config = parse({"--node-rank", "1", "--nodes", "3", "--ranks-per-node", "2", "--heap-size",
                       "1GiB", "--wait-timeout", "500ms", "--secret-file", "/s", "--bootstrap",
                       "[::1]:9000", "--barrier-algo", "kary", "--barrier-k", "4"});
  ASSERT_TRUE(config);
  EXPECT_EQ(config->node_rank, 1);
  EXPECT_EQ(config->heap_size, uint64_t{1} << 30);
  EXPECT_EQ(config->wait_timeout, std::chrono::milliseconds(500));
  EXPECT_EQ(config->bootstrap.host, "::1");
  EXPECT_EQ(config->bootstrap.port, 9000);
  EXPECT_EQ(config->barrier_algo, wire::BARRIER_ALGO_KARY);
  EXPECT_EQ(config->barrier_k, 4);
}

TEST(DaemonConfig, TomlFileWithFlagsWinning) {
  const std::string file = write_file(
      "node-rank = 1\nnodes = 2\nheap-size = \"128MiB\"\nsecret-file = \"/etc/s\"\n"
      "control-port = 7411\n");
  auto config = parse({"--config", file, "--heap-size", "64MiB"});
  ASSERT_TRUE(config);
  EXPECT_EQ(config->node_rank, 1);
  EXPECT_EQ(config->nodes, 2);
  EXPECT_EQ(config->control_port, 7411);
  EXPECT_EQ(config->secret_file, "/etc/s");
  EXPECT_EQ(config->heap_size, uint64_t{64} << 20) << "the flag wins over the file";
  std::remove(file.c_str());
}

TEST(DaemonConfig, ErrorsNameTheKeyAndWhatIsAllowed) {
  auto message = [](std::vector<std::string> args) -> std::string {
    try {
      parse(std::move(args));
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(message({"--secret-file", "/s", "--heap-size", "12 apples"}).find("--heap-size"),
            std::string::npos);
  EXPECT_NE(
      message({"--secret-file", "/s", "--transport", "carrier-pigeon"}).find("auto, tcp, verbs"),
      std::string::npos);
  EXPECT_NE(message({"--secret-file", "/s", "--rdma-gid-index", "300"}).find("0..255"),
            std::string::npos);
  EXPECT_NE(message({"--secret-file", "/s", "--verbs-progress", "maybe"}).find("pe, thread"),
            std::string::npos);
  EXPECT_NE(message({"--secret-file", "/s", "--cpu-bind", "socket"}).find("none, core"),
            std::string::npos);
  EXPECT_NE(message({"--nodes", "2"}).find("--secret-file is required"), std::string::npos);
  EXPECT_NE(message({"--secret-file", "/s", "--node-rank", "2", "--nodes", "2"}).find("0..1"),
            std::string::npos);
  EXPECT_NE(message({"--secret-file", "/s", "--no-such-flag"}).find("no-such-flag"),
            std::string::npos);
  const std::string file = write_file("nodes = 2\ncolour = \"blue\"\n");
  const std::string unknown = message({"--config", file, "--secret-file", "/s"});
  EXPECT_NE(unknown.find("unknown key 'colour'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("heap-size"), std::string::npos) << unknown;
  std::remove(file.c_str());
}

}  // namespace
}  // namespace symmesh
