// The daemon's Prometheus metrics, rendered in the text exposition format 0.0.4: HELP and TYPE
// lines, base units (seconds, bytes), counters ending in _total, and labels from small fixed
// sets (job kinds, outcomes, error kinds, peer node ranks). Events are recorded as they happen
// (jobs, barrier iterations, errors); what is a state (heap use, peers) is read at scrape time
// and passed to render().
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/histogram.h"

namespace symmesh {

class Metrics {
 public:
  // A gauge read at scrape time: one sample of a family (families come in the order given).
  struct Sample {
    std::string family;
    std::string help;
    std::vector<std::pair<std::string, std::string>> labels;
    double value = 0;
  };

  // A job's RUN phase on this node: kind (barrier, collective, ...), ok or not, wall seconds.
  void job_ran(const std::string& kind, bool ok, double seconds);
  // The iteration times of a barrier job (the slowest local PE per iteration).
  void barrier_latencies(const std::vector<double>& seconds);
  // kind: job, peer_down, auth, bad_request, timeout.
  void error(const std::string& kind);
  // How long local PE `pe` waited for each peer in a job (seconds, indexed by the peer's PE).
  void peer_waits(int pe, const std::vector<double>& seconds_by_peer);
  // Local PE `pe`'s calls in a job, per op, by the seconds each blocked (runtime/peer_waits.h).
  void call_waits(int pe, const std::map<std::string, Histogram, std::less<>>& by_op);

  std::string render(const std::vector<Sample>& gauges) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, uint64_t> jobs_;  // (kind, outcome)
  std::map<std::string, Histogram> job_seconds_;                  // by kind
  Histogram barrier_seconds_;
  std::map<std::string, uint64_t> errors_;
  std::map<std::pair<int, int>, double> peer_wait_seconds_;             // (pe, peer)
  std::map<std::pair<int, std::string>, Histogram> call_wait_seconds_;  // (pe, op)
};

// The process_* metrics Prometheus client libraries export: CPU seconds, resident and virtual
// memory, open file descriptors, start time.
std::vector<Metrics::Sample> process_samples();

}  // namespace symmesh
