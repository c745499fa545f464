// HTTP reads of a daemon's status endpoint for the tests: a page, its URL, one metric.
#pragma once

#include <map>
#include <string>

#include "tests/cluster/test_cluster.h"

namespace symmesh::testing {

struct Fetched {
  int status = 0;  // 0: no answer
  std::string body;
  std::string content_type;
};

// GET url+path with a 5 s connect and 10 s read timeout.
Fetched get(const std::string& url, const std::string& path);
// The node's status URL, as `symmesh status --json` names it.
std::string status_url(TestCluster& cluster, int node);
// The host and port of an http:// URL.
HostPort endpoint_of(const std::string& url);
// One sample of /metrics (through the strict Prometheus reader); -1 when it is absent.
double metric(const std::string& url, const std::string& family,
              const std::map<std::string, std::string>& labels = {});

}  // namespace symmesh::testing
