#include "tests/cluster/http_get.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cluster/prometheus_text.h"

namespace symmesh::testing {

Fetched get(const std::string& url, const std::string& path) {
  httplib::Client client(url);
  client.set_connection_timeout(5);
  client.set_read_timeout(10);
  auto res = client.Get(path);
  if (!res) return {};
  return {res->status, res->body, res->get_header_value("Content-Type")};
}

std::string status_url(TestCluster& cluster, int node) {
  CliRun run = cli(target(cluster, node) + " status --json");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  return nlohmann::json::parse(run.out)["status_url"].get<std::string>();
}

HostPort endpoint_of(const std::string& url) {
  return parse_host_port(url.substr(std::string("http://").size()), "url");
}

double metric(const std::string& url, const std::string& family,
              const std::map<std::string, std::string>& labels) {
  const Fetched fetched = get(url, "/metrics");
  if (fetched.status != 200) return -1;
  const auto families = parse_prometheus_text(fetched.body);
  const auto it = families.find(family);
  if (it == families.end()) return -1;
  for (const auto& sample : it->second.samples) {
    if (sample.name == family && sample.labels == labels) return sample.value;
  }
  return -1;
}

}  // namespace symmesh::testing
