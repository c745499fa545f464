#include "wire/job_trace.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace symmesh {
namespace {

// One track: every thread that worked for a PE under one name (a role's threads are started
// anew for every run of an operator).
struct Track {
  int pe = 0;
  std::string name;
  std::vector<trace::Span> spans;
  uint64_t dropped = 0;
};

std::vector<Track> tracks_of(const trace::Recorder& recorder) {
  std::vector<Track> tracks;
  std::map<std::pair<int, std::string>, size_t> index;
  for (const trace::ThreadTrace& thread : recorder.threads()) {
    const auto [it, added] = index.try_emplace({thread.pe, thread.name}, tracks.size());
    if (added) tracks.push_back(Track{thread.pe, thread.name, {}, 0});
    Track& track = tracks[it->second];
    track.spans.insert(track.spans.end(), thread.spans.begin(), thread.spans.end());
    track.dropped += thread.dropped;
  }
  // Spans are stored as they end; a track lists them as they start.
  for (Track& track : tracks) {
    std::stable_sort(
        track.spans.begin(), track.spans.end(),
        [](const trace::Span& a, const trace::Span& b) { return a.start_ns < b.start_ns; });
  }
  return tracks;
}

}  // namespace

wire::JobTrace job_trace_to_wire(const trace::Recorder& recorder, int node_rank, size_t budget) {
  const std::vector<Track> tracks = tracks_of(recorder);
  // Water-filling: the smallest tracks first, each taking at most an even share of what is left.
  std::vector<size_t> order(tracks.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tracks[a].spans.size() < tracks[b].spans.size(); });
  std::vector<size_t> keep(tracks.size());
  size_t left = budget;
  for (size_t i = 0; i < order.size(); ++i) {
    const size_t share = left / (order.size() - i);
    keep[order[i]] = std::min(tracks[order[i]].spans.size(), share);
    left -= keep[order[i]];
  }
  wire::JobTrace out;
  for (size_t t = 0; t < tracks.size(); ++t) {
    const Track& track = tracks[t];
    wire::TraceThread* thread = out.add_thread();
    thread->set_pe(uint32_t(track.pe));
    thread->set_node_rank(uint32_t(node_rank));
    thread->set_name(track.name);
    thread->set_dropped(track.dropped + (track.spans.size() - keep[t]));
    for (size_t i = 0; i < keep[t]; ++i) {  // the earliest
      wire::TraceSpan* span = thread->add_span();
      span->set_name(track.spans[i].name);
      span->set_category(track.spans[i].category);
      span->set_start_unix_ns(recorder.unix_ns(track.spans[i].start_ns));
      span->set_duration_ns(track.spans[i].end_ns - track.spans[i].start_ns);
      if (track.spans[i].peer >= 0) span->set_peer(uint32_t(track.spans[i].peer));
    }
  }
  return out;
}

}  // namespace symmesh
