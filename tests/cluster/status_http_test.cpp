// The HTTP status endpoint of real daemons: the dashboard page (self-contained), /status JSON
// with its schema and jobs, /metrics through a strict Prometheus text reader (itself shown to
// reject malformed text), /health turning 503 when a peer stops, 404 and no secrets anywhere,
// --status-addr off and a port in use; a status server stopped right after it started still ends.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "daemon/status/status_server.h"
#include "tests/cluster/held_connections.h"
#include "tests/cluster/http_get.h"
#include "tests/cluster/prometheus_text.h"
#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {
namespace {

// A daemon that fails right after starting destroys its status server before the server's
// accept loop may have begun: the destruction must still end (it once waited in accept() for
// ever). Run in a thread of its own so that a hang fails the test instead of holding it.
TEST(StatusHttp, AServerStoppedRightAfterItStartedEnds) {
  constexpr int kServers = 300;
  // Shared, not on this frame: a churn left stuck outlives the test.
  auto ended = std::make_shared<std::atomic<int>>(0);
  std::thread churn([ended] {
    for (int i = 0; i < kServers; ++i) {
      StatusServer server(HostPort{"127.0.0.1", 0}, StatusServer::Handlers{});
      ended->fetch_add(1);
    }
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (ended->load() < kServers && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling the churn, bounded
  }
  if (ended->load() < kServers) {
    churn.detach();  // stuck in a destructor: left to the process's exit
    FAIL() << "server " << ended->load() + 1 << " of " << kServers
           << " did not end within 60 s of the first's start";
  }
  churn.join();
}

// /status and /metrics read the daemon's state under its locks, which a slow peer may hold:
// they are made off the event loop, so /health (and the 404s) answer while one waits.
TEST(StatusHttp, HealthAnswersWhileAStatusPageWaitsForTheDaemon) {
  std::promise<void> release, entered;
  std::shared_future<void> released = release.get_future().share();
  StatusServer::Handlers handlers;
  handlers.health = [] { return StatusServer::Health{true, ""}; };
  handlers.status_json = [released, &entered] {
    entered.set_value();
    released.wait_for(std::chrono::seconds(30));  // as a lock a slow peer holds
    return std::string("{}");
  };
  StatusServer server(HostPort{"127.0.0.1", 0}, handlers);
  auto status = std::async(std::launch::async, [&] { return get(server.url(), "/status"); });
  ASSERT_EQ(entered.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(get(server.url(), "/health").status, 200);
  EXPECT_EQ(get(server.url(), "/nothing").status, 404);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  release.set_value();
  ASSERT_EQ(status.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const Fetched page = status.get();
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.body, "{}");
}

TEST(StatusHttp, StatusJsonHasTheClusterPeersAndJobs) {
  TestCluster cluster(shape(2, 2));
  const std::string url = status_url(cluster, 0);
  ASSERT_TRUE(url.starts_with("http://127.0.0.1:")) << url;  // loopback unless asked
  ASSERT_EQ(cli(target(cluster) + " submit barrier --iters 5").exit_code, 0);
  const Fetched fetched = get(url, "/status");
  ASSERT_EQ(fetched.status, 200);
  EXPECT_EQ(fetched.content_type, "application/json");
  const auto json = nlohmann::json::parse(fetched.body);
  for (const char* key :
       {"node_rank", "nodes",         "ranks_per_node", "state",         "heap_size",
        "heap_used", "heap_job_peak", "jobs_run",       "jobs_failed",   "jobs_queued",
        "version",   "uptime_s",      "status_url",     "cluster",       "peers",
        "jobs",      "cpus",          "attach_socket",  "attached_pids", "processes_taken"}) {
    EXPECT_TRUE(json.contains(key)) << key << ": " << fetched.body;
  }
  EXPECT_EQ(json["state"], "ready");
  EXPECT_EQ(json["status_url"], url);
  ASSERT_EQ(json["cluster"].size(), 2u);
  for (const auto& node : json["cluster"]) {
    EXPECT_TRUE(node["status_url"].get<std::string>().starts_with("http://127.0.0.1:")) << node;
    EXPECT_EQ(node["ranks"], 2);
    EXPECT_EQ(node["state"], "up") << node;
    EXPECT_GT(node["incarnation"].get<uint64_t>(), 0u) << node;
  }
  EXPECT_EQ(json["epoch"], 1);
  ASSERT_EQ(json["peers"].size(), 1u);
  EXPECT_EQ(json["peers"][0]["up"], true);
  EXPECT_FALSE(json["peers"][0]["transport"].get<std::string>().empty());
  ASSERT_GE(json["jobs"].size(), 1u);
  const auto& newest = json["jobs"][0];  // newest first
  EXPECT_EQ(newest["kind"], "barrier");
  EXPECT_EQ(newest["state"], "ok");
  EXPECT_GE(newest["finished_unix_s"].get<double>(), newest["started_unix_s"].get<double>());
  EXPECT_EQ(newest["result"]["status"], "ok");
  EXPECT_EQ(newest["result"]["iters"], 5);

  // A job's buffers show in the heap's job peak: 2 ranks x (1 MiB in + 1 MiB out) here.
  ASSERT_EQ(cli(target(cluster) + " submit collective --op allreduce --bytes 1MiB").exit_code, 0);
  const auto after = nlohmann::json::parse(get(url, "/status").body);
  EXPECT_GE(after["heap_job_peak"].get<uint64_t>(), 4u << 20) << after;
  EXPECT_LE(after["heap_job_peak"].get<uint64_t>(), after["heap_size"].get<uint64_t>());

  // The other node answers too, without the root's job list.
  const auto other = nlohmann::json::parse(get(status_url(cluster, 1), "/status").body);
  EXPECT_EQ(other["node_rank"], 1);
  EXPECT_TRUE(other["jobs"].empty());
}

TEST(StatusHttp, MetricsAreStrictPrometheusText) {
  TestCluster cluster(shape(2, 1));
  ASSERT_EQ(cli(target(cluster) + " submit barrier --iters 20").exit_code, 0);
  ASSERT_EQ(
      cli(target(cluster) + " submit collective --op allgather --bytes 1MiB --iters 1").exit_code,
      0);
  CliRun failed = cli(target(cluster) +
                      " submit matmul --op gemm-allreduce --m 64 --n 64 "
                      "--k 8 --tile-m 4096 --tile-n 4096 --json");
  EXPECT_NE(failed.exit_code, 0);  // a workspace too big for the heap: an error to count
  const std::string wrong = cluster.dir() + "/wrong-secret";
  write_secret_file(wrong, "not-the-secret-but-long-enough");
  EXPECT_NE(
      cli("--daemon " + cluster.control(0).str() + " --secret-file " + wrong + " status").exit_code,
      0);
  EXPECT_NE(cli(target(cluster) + " submit combine --tokens 4 --hidden 12 --topk 1 --experts 2")
                .exit_code,
            0);  // hidden not a multiple of 8: refused at submission
  const std::string url = status_url(cluster, 0);
  const Fetched fetched = get(url, "/metrics");
  ASSERT_EQ(fetched.status, 200);
  EXPECT_EQ(fetched.content_type, "text/plain; version=0.0.4; charset=utf-8");
  std::map<std::string, PromFamily> families;
  ASSERT_NO_THROW(families = parse_prometheus_text(fetched.body)) << fetched.body;
  auto value = [&](const std::string& family, const std::map<std::string, std::string>& labels,
                   const std::string& sample_name = "") {
    for (const auto& s : families.at(family).samples) {
      if (s.labels == labels && (sample_name.empty() ? s.name == family : s.name == sample_name)) {
        return s.value;
      }
    }
    ADD_FAILURE() << family << " has no such sample";
    return -1.0;
  };
  EXPECT_GE(value("symmesh_jobs_total", {{"kind", "barrier"}, {"outcome", "ok"}}), 1);
  EXPECT_EQ(value("symmesh_jobs_total", {{"kind", "matmul"}, {"outcome", "error"}}), 1);
  EXPECT_EQ(families.at("symmesh_job_duration_seconds").type, "histogram");
  EXPECT_GE(value("symmesh_barrier_latency_seconds", {}, "symmesh_barrier_latency_seconds_count"),
            20);
  EXPECT_GE(value("symmesh_errors_total", {{"kind", "job"}}), 1);
  EXPECT_GE(value("symmesh_errors_total", {{"kind", "bad_request"}}), 1);
  EXPECT_GE(value("symmesh_errors_total", {{"kind", "auth"}}), 1);
  EXPECT_EQ(value("symmesh_up", {}), 1);
  EXPECT_EQ(value("symmesh_node_state", {{"node", "1"}, {"state", "up"}}), 1);
  EXPECT_EQ(value("symmesh_node_state", {{"node", "1"}, {"state", "down"}}), 0);
  EXPECT_GT(value("symmesh_node_incarnation", {{"node", "1"}}), 0);
  EXPECT_EQ(value("symmesh_peer_up", {{"peer", "1"}, {"transport", "tcp"}}), 1);
  EXPECT_GT(value("symmesh_heap_bytes", {}), 0);
  // The allgather put this node's 1 MiB to the peer (twice: the warm-up and the run) and got
  // the peer's.
  const std::map<std::string, std::string> peer{{"peer", "1"}, {"transport", "tcp"}};
  EXPECT_GE(value("symmesh_peer_sent_bytes_total", peer), 2 << 20);
  EXPECT_GE(value("symmesh_peer_received_bytes_total", peer), 2 << 20);
  EXPECT_GT(value("symmesh_peer_sent_operations_total", peer), 0);
  EXPECT_GT(value("symmesh_peer_received_operations_total", peer), 0);
  EXPECT_GT(value("process_resident_memory_bytes", {}), 0);
  EXPECT_GT(value("process_cpu_seconds_total", {}), 0);
  EXPECT_GT(value("process_start_time_seconds", {}), 1.7e9);
}

TEST(StatusHttp, TheTextReaderRejectsWhatPrometheusRejects) {
  const std::string good =
      "# HELP a_total A.\n# TYPE a_total counter\na_total{x=\"1\"} 3\n"
      "# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\n"
      "h_sum 3.5\nh_count 2\n";
  EXPECT_NO_THROW(parse_prometheus_text(good));
  for (const std::string& bad : {
           std::string("# HELP a A.\n# TYPE a gauge\n1a 1\n"),            // bad name
           std::string("# HELP a A.\n# TYPE a gauge\na{x=1} 1\n"),        // unquoted
           std::string("# HELP a A.\n# TYPE a gauge\na{x=\"\\q\"} 1\n"),  // bad escape
           std::string("# HELP a A.\n# TYPE a gauge\na one\n"),           // not a number
           std::string("# HELP a A.\n# TYPE a gauge\na 1\na 2\n"),        // a series twice
           std::string("# HELP a A.\na 1\n# TYPE a gauge\n"),             // TYPE too late
           std::string("# HELP a A.\n# TYPE a gauge\na 1\n# HELP b B.\n# TYPE b gauge\nb 1\n"
                       "a{y=\"2\"} 1\n"),                        // split family
           std::string("# HELP a A.\n# TYPE a counter\na 1\n"),  // no _total
           std::string("# HELP a A.\n# TYPE a gauge\na 1"),      // no newline
           std::string("# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 2\n"
                       "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"),  // not cumulative
           std::string("# HELP h H.\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\n"
                       "h_count 1\n"),  // no +Inf
       }) {
    EXPECT_THROW(parse_prometheus_text(bad), std::runtime_error) << bad;
  }
}

TEST(StatusHttp, HealthTurns503WhenAPeerStopsAndNothingSecretIsServed) {
  TestCluster cluster(shape(2, 1));
  const std::string url = status_url(cluster, 0);
  Fetched health = get(url, "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");
  for (const char* path : {"/", "/health", "/status", "/metrics", "/nope"}) {
    const Fetched page = get(url, path);
    EXPECT_EQ(page.body.find(cluster.secret()), std::string::npos) << path;
  }
  const Fetched page = get(url, "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  for (const char* part :
       {"<svg id=\"cluster\"", "<table id=\"jobs\"", "fetch(\"/status\")", "fetch(\"/metrics\")"}) {
    EXPECT_NE(page.body.find(part), std::string::npos) << part;
  }
  // Nothing is fetched from elsewhere: the only URL in the page is the SVG namespace's name.
  for (size_t at = page.body.find("http"); at != std::string::npos;
       at = page.body.find("http", at + 1)) {
    EXPECT_EQ(page.body.compare(at, 26, "http://www.w3.org/2000/svg"), 0)
        << page.body.substr(at, 60);
  }
  const Fetched missing = get(url, "/nope");
  EXPECT_EQ(missing.status, 404);
  EXPECT_NE(missing.body.find("/metrics"), std::string::npos) << missing.body;

  cluster.daemon(1).stop(SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int i = 0; i < 3000 && std::chrono::steady_clock::now() < deadline; ++i) {
    health = get(url, "/health");
    if (health.status == 503) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(health.status, 503);
  EXPECT_NE(health.body.find("node 1"), std::string::npos) << health.body;
}

// A source address may hold kMaxStatusConnectionsPerSource connections: those past it are
// closed at once, and the others stay.
TEST(StatusHttp, ASourcePastItsCapIsClosedAtOnce) {
  ASSERT_TRUE(can_hold(int(kMaxStatusConnectionsPerSource) + 64)) << "ulimit -Hn is too low";
  TestCluster cluster(shape(1, 1));
  const std::string url = status_url(cluster, 0);
  HeldConnections held;
  held.open(endpoint_of(url), "127.0.0.30", int(kMaxStatusConnectionsPerSource) + 4);
  const Deadline deadline = deadline_after(std::chrono::seconds(5));
  while (held.ended() < 4 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling the refusals, bounded
  }
  EXPECT_EQ(held.ended(), 4);
  EXPECT_EQ(get(url, "/health").status, 200);  // another source is served
}

// Idle and trickling clients cost the endpoint a socket each, never a thread: with a thousand
// connections that never send a byte and a hundred that send one a second (a request that
// never ends), from source addresses of their own, /health answers every probe at once. The
// trickling ones are shut at the header deadline, the idle ones at the idle limit. The probes'
// p50 and p99 are recorded (tests/reliability-report.sh holds the p99 to 50 ms).
TEST(StatusHttp, HealthAnswersAtOnceUnderAThousandIdleAndAHundredTricklingConnections) {
  constexpr int kIdle = 1000, kTrickling = 100, kProbes = 200, kPerSource = 200;
  ASSERT_TRUE(can_hold(kIdle + kTrickling + 200)) << "ulimit -Hn is too low for the flood";
  TestCluster cluster(shape(1, 1));
  const std::string url = status_url(cluster, 0);
  const HostPort endpoint = endpoint_of(url);
  HeldConnections idle, trickling;
  for (int source = 0; source < kIdle / kPerSource; ++source) {
    idle.open(endpoint, "127.0.0." + std::to_string(2 + source), kPerSource);
  }
  trickling.open(endpoint, "127.0.0.20", kTrickling);
  const auto opened = Clock::now();
  const std::string request = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  size_t sent = 0;
  auto next_byte = Clock::now();
  const auto trickle = [&] {  // one byte a second on each
    if (Clock::now() < next_byte) return;
    trickling.send(std::string(1, request[std::min(sent++, request.size() - 1)]));
    next_byte += std::chrono::seconds(1);
  };
  std::vector<double> ms;
  for (int i = 0; i < kProbes; ++i) {  // over 4 s, as a prober would, while the bytes trickle
    trickle();
    std::this_thread::sleep_until(opened + i * std::chrono::milliseconds(20));
    const auto start = Clock::now();
    const Fetched health = get(url, "/health");
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    ASSERT_EQ(health.status, 200) << "probe " << i;
  }
  std::sort(ms.begin(), ms.end());
  const double p50 = ms[ms.size() / 2], p99 = ms[ms.size() * 99 / 100];
  RecordProperty("health_p50_us", int(p50 * 1000));
  RecordProperty("health_p99_us", int(p99 * 1000));
  std::printf("/health under %d idle + %d trickling connections: p50 %.2f ms, p99 %.2f ms\n", kIdle,
              kTrickling, p50, p99);
  EXPECT_LT(ms.back(), 2000) << "a probe waited behind the held connections";
  EXPECT_EQ(idle.ended() + trickling.ended(), 0) << "connections ended before any deadline";
  // Both deadlines are kIdleLimit = kHeaderLimit from the opening: every held connection ends
  // well before twice it, while the trickle goes on.
  const Deadline deadline = opened + 2 * kHeaderLimit + std::chrono::seconds(5);
  while (idle.ended() + trickling.ended() < kIdle + kTrickling && Clock::now() < deadline) {
    trickle();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling the deadlines, bounded
  }
  EXPECT_EQ(trickling.ended(), kTrickling) << "trickling requests outlived the header deadline";
  EXPECT_EQ(idle.ended(), kIdle) << "idle connections outlived the idle limit";
  EXPECT_EQ(get(url, "/health").status, 200);
}

TEST(StatusHttp, OffMeansNoEndpointAndAPortInUseIsNamed) {
  ClusterOptions off = shape(1, 1);
  off.extra_args = {"--status-addr", "off"};
  TestCluster quiet(off);
  const auto json = nlohmann::json::parse(cli(target(quiet) + " status --json").out);
  EXPECT_EQ(json["status_url"], "");

  Listener squatter(HostPort{"127.0.0.1", 0});  // holds a port, so the daemon cannot have it
  const int port = squatter.local_endpoint().port;
  ClusterOptions taken = shape(1, 1);
  taken.extra_args = {"--status-addr", "127.0.0.1:" + std::to_string(port)};
  taken.wait_ready = false;
  TestCluster refused(taken);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int i = 0; i < 3000 && refused.daemon(0).running(); ++i) {  // it exits by itself
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(refused.daemon(0).running());
  EXPECT_NE(refused.daemon(0).stop(SIGTERM), 0);
  const std::string log = refused.daemon(0).log();
  EXPECT_NE(log.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << log;
  EXPECT_NE(log.find("--status-addr"), std::string::npos) << log;
}

}  // namespace
}  // namespace symmesh::testing
