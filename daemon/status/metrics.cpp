#include "daemon/status/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace symmesh {
namespace {

const std::vector<double> kJobBounds = {0.001, 0.01, 0.1, 0.5, 1, 5, 10, 60, 300};
const std::vector<double> kBarrierBounds = {1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
                                            1e-3, 2.5e-3, 5e-3, 1e-2, 0.1,    1};

using Labels = std::vector<std::pair<std::string, std::string>>;

// Label values escape backslash, double quote and newline, as the format asks.
std::string escape(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

std::string number(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (std::isnan(value)) return "NaN";
  char text[32];
  const auto end = std::to_chars(text, text + sizeof(text), value).ptr;  // shortest exact form
  return std::string(text, end);
}

class Writer {
 public:
  void family(const std::string& name, const char* type, const std::string& help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  void sample(const std::string& name, const Labels& labels, double value) {
    out_ << name;
    if (!labels.empty()) {
      out_ << "{";
      for (size_t i = 0; i < labels.size(); ++i) {
        out_ << (i ? "," : "") << labels[i].first << "=\"" << escape(labels[i].second) << "\"";
      }
      out_ << "}";
    }
    out_ << " " << number(value) << "\n";
  }
  template <class H>
  void histogram(const std::string& name, Labels labels, const H& h) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      Labels with_le = labels;
      with_le.emplace_back("le", i < h.bounds.size() ? number(h.bounds[i]) : "+Inf");
      sample(name + "_bucket", with_le, double(cumulative));
    }
    sample(name + "_sum", labels, h.sum);
    sample(name + "_count", labels, double(h.count));
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace

void Metrics::job_ran(const std::string& kind, bool ok, double seconds) {
  std::lock_guard lock(mutex_);
  ++jobs_[{kind, ok ? "ok" : "error"}];
  auto [it, fresh] = job_seconds_.try_emplace(kind);
  if (fresh) it->second.bounds = kJobBounds;
  it->second.observe(seconds);
}

void Metrics::barrier_latencies(const std::vector<double>& seconds) {
  std::lock_guard lock(mutex_);
  if (barrier_seconds_.bounds.empty()) barrier_seconds_.bounds = kBarrierBounds;
  for (double s : seconds) barrier_seconds_.observe(s);
}

void Metrics::error(const std::string& kind) {
  std::lock_guard lock(mutex_);
  ++errors_[kind];
}

void Metrics::peer_waits(int pe, const std::vector<double>& seconds_by_peer) {
  std::lock_guard lock(mutex_);
  for (size_t peer = 0; peer < seconds_by_peer.size(); ++peer) {
    if (seconds_by_peer[peer] > 0) peer_wait_seconds_[{pe, int(peer)}] += seconds_by_peer[peer];
  }
}

void Metrics::call_waits(int pe, const std::map<std::string, Histogram, std::less<>>& by_op) {
  std::lock_guard lock(mutex_);
  for (const auto& [op, h] : by_op) call_wait_seconds_[{pe, op}].merge(h);
}

std::string Metrics::render(const std::vector<Sample>& gauges) const {
  Writer w;
  {
    std::lock_guard lock(mutex_);
    w.family("symmesh_jobs_total", "counter", "Jobs this node ran, by kind and outcome.");
    for (const auto& [key, count] : jobs_) {
      w.sample("symmesh_jobs_total", {{"kind", key.first}, {"outcome", key.second}}, double(count));
    }
    w.family("symmesh_job_duration_seconds", "histogram",
             "Wall time of a job's run on this node, by kind.");
    for (const auto& [kind, h] : job_seconds_) {
      w.histogram("symmesh_job_duration_seconds", {{"kind", kind}}, h);
    }
    w.family("symmesh_barrier_latency_seconds", "histogram",
             "Barrier iterations of barrier jobs (the slowest local PE of each).");
    Histogram barrier = barrier_seconds_;
    if (barrier.bounds.empty()) barrier.bounds = kBarrierBounds;
    if (barrier.counts.empty()) barrier.counts.assign(barrier.bounds.size() + 1, 0);
    w.histogram("symmesh_barrier_latency_seconds", {}, barrier);
    w.family(
        "symmesh_errors_total", "counter",
        "Errors by kind: job (a job failed here), peer_down, auth (a wrong proof of the secret), "
        "bad_request (garbage, a wrong version or role), timeout (a handshake past its deadline).");
    for (const auto& [kind, count] : errors_) {
      w.sample("symmesh_errors_total", {{"kind", kind}}, double(count));
    }
    w.family("symmesh_peer_wait_seconds_total", "counter",
             "Seconds a PE of this node spent blocked in jobs on a word only the peer writes (its "
             "data, its signal, its entering a call).");
    for (const auto& [key, seconds] : peer_wait_seconds_) {
      w.sample("symmesh_peer_wait_seconds_total",
               {{"pe", std::to_string(key.first)}, {"peer", std::to_string(key.second)}}, seconds);
    }
    w.family("symmesh_call_blocked_seconds", "histogram",
             "Per call of a job or an attached process (a collective, a dispatch, a combine, ...): "
             "the seconds a PE of this node blocked in it waiting for its peers, summed over the "
             "PE's threads, by op.");
    for (const auto& [key, h] : call_wait_seconds_) {
      w.histogram("symmesh_call_blocked_seconds",
                  {{"pe", std::to_string(key.first)}, {"op", key.second}}, h);
    }
  }
  std::string current;
  for (const Sample& g : gauges) {
    if (g.family != current) {
      w.family(g.family, g.family.ends_with("_total") ? "counter" : "gauge", g.help);
      current = g.family;
    }
    w.sample(g.family, g.labels, g.value);
  }
  return w.text();
}

std::vector<Metrics::Sample> process_samples() {
  std::vector<Metrics::Sample> out;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  out.push_back(
      {"process_cpu_seconds_total", "User and system CPU time spent in seconds.", {}, cpu});
  std::ifstream statm("/proc/self/statm");
  double pages_virtual = 0, pages_resident = 0;
  statm >> pages_virtual >> pages_resident;
  const double page = double(sysconf(_SC_PAGESIZE));
  out.push_back({"process_resident_memory_bytes",
                 "Resident memory size in bytes.",
                 {},
                 pages_resident * page});
  out.push_back(
      {"process_virtual_memory_bytes", "Virtual memory size in bytes.", {}, pages_virtual * page});
  double fds = 0;
  std::error_code ignored;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ignored);
       it != std::filesystem::directory_iterator(); it.increment(ignored)) {
    ++fds;
  }
  out.push_back({"process_open_fds", "Number of open file descriptors.", {}, fds});
  return out;
}

}  // namespace symmesh
