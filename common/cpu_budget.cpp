#include "common/cpu_budget.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "common/errors.h"

namespace symmesh {
namespace {

std::string first_line(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

// The process's cgroup paths: v2 ("0::/a/b") and v1's cpu controller ("4:cpu,cpuacct:/a/b").
struct CgroupPaths {
  std::string v2;
  std::string v1_cpu;
};

CgroupPaths cgroup_paths(const std::string& root) {
  CgroupPaths paths;
  std::ifstream in(root + "/proc/self/cgroup");
  for (std::string line; std::getline(in, line);) {
    const size_t first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) paths.v2 = path;
    for (size_t at = 0; at <= controllers.size();) {
      const size_t comma = std::min(controllers.find(',', at), controllers.size());
      if (controllers.compare(at, comma - at, "cpu") == 0) paths.v1_cpu = path;
      at = comma + 1;
    }
  }
  return paths;
}

// The quota in CPUs of one cgroup directory; 0 when it sets none.
double quota_in(const std::filesystem::path& dir, bool v2) {
  double quota = 0, period = 0;
  if (v2) {
    const std::string max = first_line(dir / "cpu.max");  // "max 100000" or "150000 100000"
    if (max.empty() || max.starts_with("max")) return 0;
    if (std::sscanf(max.c_str(), "%lf %lf", &quota, &period) != 2) return 0;
  } else {
    quota = std::atof(first_line(dir / "cpu.cfs_quota_us").c_str());
    period = std::atof(first_line(dir / "cpu.cfs_period_us").c_str());
  }
  return quota > 0 && period > 0 ? quota / period : 0;
}

// The tightest quota of the cgroup at `path` under `mount` and its ancestors.
double tightest_quota(const std::filesystem::path& mount, std::string path, bool v2) {
  double tightest = 0;
  for (;;) {
    const double quota = quota_in(mount / std::filesystem::path(path).relative_path(), v2);
    if (quota > 0 && (tightest == 0 || quota < tightest)) tightest = quota;
    if (path.empty() || path == "/") return tightest;
    const size_t slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
}

double cgroup_quota(const std::string& root) {
  const CgroupPaths paths = cgroup_paths(root);
  const std::filesystem::path mount = root + "/sys/fs/cgroup";
  double quota = 0;
  if (!paths.v2.empty()) quota = tightest_quota(mount, paths.v2, true);
  if (quota == 0 && !paths.v1_cpu.empty()) {
    for (const char* dir : {"cpu,cpuacct", "cpu"}) {
      if (std::filesystem::exists(mount / dir)) {
        quota = tightest_quota(mount / dir, paths.v1_cpu, false);
        break;
      }
    }
  }
  return quota;
}

std::vector<std::vector<int>> numa_nodes(const std::vector<int>& allowed, const std::string& root) {
  const std::set<int> mine(allowed.begin(), allowed.end());
  std::vector<std::pair<int, std::vector<int>>> found;  // by node number
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator(root + "/sys/devices/system/node", error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with("node") || name.size() == 4 ||
        !std::all_of(name.begin() + 4, name.end(), ::isdigit)) {
      continue;
    }
    std::vector<int> cpus;
    try {
      for (int cpu : parse_cpu_list(first_line(entry.path() / "cpulist"), name)) {
        if (mine.contains(cpu)) cpus.push_back(cpu);
      }
    } catch (const InvalidArgument&) {
      continue;  // a node the kernel describes otherwise is not placed on
    }
    if (!cpus.empty()) found.emplace_back(std::stoi(name.substr(4)), std::move(cpus));
  }
  std::sort(found.begin(), found.end());
  std::vector<std::vector<int>> nodes;
  for (auto& [number, cpus] : found) nodes.push_back(std::move(cpus));
  if (nodes.empty()) nodes.push_back(allowed);
  return nodes;
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view text, const std::string& what) {
  std::set<int> cpus;
  const auto bad = [&] {
    return InvalidArgument(what + ": '" + std::string(text) +
                           "' is not a CPU list (allowed: numbers and ranges, as 0-3,8,10-11)");
  };
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text.empty()) return {};
  for (size_t at = 0; at <= text.size();) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string part(text.substr(at, comma - at));
    int first = 0, last = 0;
    char tail = 0;
    if (std::sscanf(part.c_str(), "%d-%d%c", &first, &last, &tail) == 2) {
    } else if (std::sscanf(part.c_str(), "%d%c", &first, &tail) == 1) {
      last = first;
    } else {
      throw bad();
    }
    if (first < 0 || last < first || last >= 1 << 16) throw bad();
    for (int cpu = first; cpu <= last; ++cpu) cpus.insert(cpu);
    at = comma + 1;
  }
  return {cpus.begin(), cpus.end()};
}

std::string cpu_list_text(const std::vector<int>& cpus) {
  std::string text;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    text += (text.empty() ? "" : ",") + std::to_string(cpus[i]);
    if (j > i) text += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return text;
}

bool CpuBudget::oversubscribed() const {
  return !allowed.empty() && size_t(usable) > allowed.size();
}

std::string CpuBudget::describe() const {
  char quota_text[32];
  std::snprintf(quota_text, sizeof(quota_text), "%.1f", quota);
  const std::string flag = !from_flag ? ""
                           : oversubscribed()
                               ? "--cpus, more than the " + std::to_string(allowed.size()) +
                                     " CPUs it may run on: its jobs' threads share them; "
                               : "--cpus; ";
  return std::to_string(usable) + " CPUs (" + flag + "affinity " + cpu_list_text(allowed) + ", " +
         (quota > 0 ? "cgroup quota " + std::string(quota_text) : "no cgroup quota") + ", " +
         std::to_string(numa.size()) + " NUMA node" + (numa.size() == 1 ? "" : "s") + ")";
}

CpuBudget read_cpu_budget(std::vector<int> allowed, int cpus_flag, const std::string& root) {
  CpuBudget budget;
  budget.allowed = std::move(allowed);
  budget.quota = cgroup_quota(root);
  budget.numa = numa_nodes(budget.allowed, root);
  int usable = std::max<int>(1, int(budget.allowed.size()));
  if (budget.quota > 0) {  // a quota past the mask (up to 1.7e10 CPUs) changes nothing
    usable = std::max(1, int(std::floor(std::min(budget.quota, double(usable)))));
  }
  if (cpus_flag > 0) {
    usable = cpus_flag;
    budget.from_flag = true;
  }
  budget.usable = usable;
  return budget;
}

FusedThreads default_fused_threads(int usable, int ranks_per_node) {
  const int share = std::max(1, usable / std::max(1, ranks_per_node));
  FusedThreads threads;
  threads.comm = std::clamp(share / 8, 1, kMaxFusedThreads);
  threads.compute = std::clamp(share - threads.comm, 1, kMaxFusedThreads);
  return threads;
}

}  // namespace symmesh
