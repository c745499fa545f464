// The dashboard in a real browser: headless Chromium (Debian's chromium) loads GET / from a
// running 2-node cluster with a traced job selected (#job=ID) and the DOM it ends with is
// checked: both nodes and their link (coloured by transport) drawn, the job listed, and the
// job's timeline rendered with a row per PE and compute and comm spans. A screenshot is kept
// as a test artifact (build/test-artifacts/dashboard.png). Chromium's virtual time does not
// advance while a fetch is pending, so the page has polled and drawn before the DOM is read,
// however slow the machine.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

constexpr const char* kChromium = "/usr/bin/chromium";

std::string run(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) out.append(buffer, n);
  pclose(pipe);
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Dashboard, HeadlessChromiumDrawsTheClusterTheJobsAndATracedJobsTimeline) {
  if (!std::filesystem::exists(kChromium)) {
    GTEST_SKIP() << kChromium << " is not installed (deploy/install-deps.sh installs it)";
  }
  TestCluster cluster(shape(2, 2));
  const uint64_t id = submit_job(cluster,
                                 "matmul --op allgather-matmul --m 256 --n 256 --k 256 "
                                 "--tile-m 64 --tile-n 64 --iters 2 --trace");
  ASSERT_NE(id, 0u);
  const std::string url =
      nlohmann::json::parse(cli(target(cluster) + " status --json").out)["status_url"];
  const std::string page = url + "/#job=" + std::to_string(id);
  // Its own profile directory: parallel tests never share one. No sandbox: CI runs as root.
  const std::string chromium = std::string("timeout 120 ") + kChromium +
                               " --headless --no-sandbox --disable-gpu --hide-scrollbars "
                               "--user-data-dir=" +
                               cluster.dir() + "/chromium --virtual-time-budget=10000 ";

  const std::string dom = run(chromium + "--dump-dom '" + page + "' 2>/dev/null");
  ASSERT_NE(dom.find("<svg id=\"cluster\""), std::string::npos) << dom.substr(0, 2000);
  EXPECT_EQ(count(dom, "class=\"node"), 2u) << dom.substr(0, 4000);
  EXPECT_NE(dom.find("data-node=\"0\""), std::string::npos);
  EXPECT_NE(dom.find("data-node=\"1\""), std::string::npos);
  EXPECT_EQ(count(dom, "class=\"link tcp\""), 1u) << dom.substr(0, 4000);
  EXPECT_NE(dom.find("data-job=\"" + std::to_string(id) + "\""), std::string::npos);
  ASSERT_NE(dom.find("id=\"trace-timeline\""), std::string::npos) << dom.substr(0, 6000);
  for (int pe = 0; pe < 4; ++pe) {
    EXPECT_NE(dom.find("class=\"row\" data-pe=\"" + std::to_string(pe) + "\""), std::string::npos)
        << "no timeline row for PE " << pe;
  }
  EXPECT_GT(count(dom, "class=\"span compute\""), 0u);
  EXPECT_GT(count(dom, "class=\"span comm\""), 0u);

  const std::filesystem::path artifacts =
      std::filesystem::path(bin_dir()).parent_path() / "test-artifacts";
  std::filesystem::create_directories(artifacts);
  const std::filesystem::path screenshot = artifacts / "dashboard.png";
  std::filesystem::remove(screenshot);
  run(chromium + "--window-size=1000,1200 --screenshot=" + screenshot.string() + " '" + page +
      "' 2>/dev/null");
  ASSERT_TRUE(std::filesystem::exists(screenshot));
  EXPECT_GT(std::filesystem::file_size(screenshot), 10000u);  // a page, not a blank
}

}  // namespace
}  // namespace symmesh::testing
