// Job traces: spans recorded only on bound threads, buffers that keep their earliest spans,
// helper threads joining through the context, the thread names bindings give, the per-track budget,
// the Chrome JSON (checked by a strict reader that is itself shown to reject broken traces), and
// progress counting.
#include <gtest/gtest.h>

#include <thread>

#include "common/progress.h"
#include "common/thread_name.h"
#include "common/trace.h"
#include "tests/common/chrome_trace_check.h"
#include "wire/chrome_trace.h"
#include "wire/job_trace.h"

namespace symmesh {
namespace {

TEST(Trace, NothingIsRecordedOnAThreadThatIsNotBound) {
  trace::Recorder recorder;
  { const trace::Scope span("put", "comm"); }
  {
    const trace::ThreadBinding off({nullptr, 0}, "main");  // tracing off for this job
    const trace::Scope span("put", "comm");
  }
  EXPECT_TRUE(recorder.threads().empty());
  EXPECT_EQ(trace::current().recorder, nullptr);
}

TEST(Trace, BoundThreadsRecordNestedSpansAndHelpersJoinThroughTheContext) {
  trace::Recorder recorder;
  {
    const trace::ThreadBinding main({&recorder, 3}, "main");
    const trace::Scope outer("fused run", "iteration");
    { const trace::Scope inner("gemm tile", "compute"); }
    std::thread helper([context = trace::current()] {
      const trace::ThreadBinding bound(context, "comm 0");
      const trace::Scope span("put", "comm");
    });
    helper.join();
  }
  EXPECT_EQ(trace::current().recorder, nullptr);  // the binding ended with its scope
  ASSERT_EQ(recorder.threads().size(), 2u);
  const auto& main = recorder.threads()[0];
  EXPECT_EQ(main.pe, 3);
  EXPECT_EQ(main.name, "main");
  ASSERT_EQ(main.spans.size(), 2u);  // stored as they end: inner first
  EXPECT_STREQ(main.spans[0].name, "gemm tile");
  EXPECT_STREQ(main.spans[1].category, "iteration");
  EXPECT_LE(main.spans[1].start_ns, main.spans[0].start_ns);
  EXPECT_GE(main.spans[1].end_ns, main.spans[0].end_ns);
  const auto& helper = recorder.threads()[1];
  EXPECT_EQ(helper.pe, 3);
  EXPECT_EQ(helper.name, "comm 0");
  ASSERT_EQ(helper.spans.size(), 1u);
  EXPECT_STREQ(helper.spans[0].name, "put");
}

TEST(Trace, ABoundThreadCarriesItsPeAndRoleAsItsNameTruncatedAndGetsItsOldNameBack) {
  std::thread worker([] {
    set_thread_name("worker");
    {
      const trace::ThreadBinding bound({nullptr, 3}, "forward ch0");  // named traced or not
      EXPECT_EQ(thread_name(), "pe3 forward ch0");
      {
        const trace::ThreadBinding nested({nullptr, 12}, "receive ch11");
        EXPECT_EQ(thread_name(), "pe12 receive ch");  // the kernel keeps 15 bytes
      }
      EXPECT_EQ(thread_name(), "pe3 forward ch0");
    }
    EXPECT_EQ(thread_name(), "worker");
  });
  worker.join();
}

TEST(Trace, AFullBufferKeepsItsEarliestSpansAndCountsTheRest) {
  trace::Recorder recorder(/*spans_per_thread=*/2);
  {
    const trace::ThreadBinding main({&recorder, 0}, "main");
    for (int i = 0; i < 5; ++i) const trace::Scope span("put", "comm");
  }
  ASSERT_EQ(recorder.threads().size(), 1u);
  EXPECT_EQ(recorder.threads()[0].spans.size(), 2u);
  EXPECT_EQ(recorder.threads()[0].dropped, 3u);
}

TEST(Trace, TheJobBudgetLetsSmallTracksKeepEverythingAndTrimsTheLargest) {
  trace::Recorder recorder;
  const int counts[] = {1, 10, 100};  // spans on thread t of PE 0
  for (int t = 0; t < 3; ++t) {
    const trace::ThreadBinding bound({&recorder, 0}, "thread " + std::to_string(t));
    for (int i = 0; i < counts[t]; ++i) const trace::Scope span("put", "comm");
  }
  const wire::JobTrace trace = job_trace_to_wire(recorder, /*node_rank=*/1, /*budget=*/30);
  ASSERT_EQ(trace.thread_size(), 3);
  EXPECT_EQ(trace.thread(0).span_size(), 1);
  EXPECT_EQ(trace.thread(1).span_size(), 10);
  EXPECT_EQ(trace.thread(2).span_size(), 19);  // what is left
  EXPECT_EQ(trace.thread(2).dropped(), 81u);
  EXPECT_EQ(trace.thread(2).node_rank(), 1u);
  for (const auto& thread : trace.thread()) {
    for (int i = 1; i < thread.span_size(); ++i) {
      EXPECT_LE(thread.span(i - 1).start_unix_ns(), thread.span(i).start_unix_ns());
    }
  }
}

TEST(Trace, ThreadsOfOneRoleStartedAgainShareATrack) {
  trace::Recorder recorder;
  for (int run = 0; run < 3; ++run) {  // an operator's roles get new threads every run
    std::thread role([&] {
      const trace::ThreadBinding bound({&recorder, 2}, "compute 0");
      const trace::Scope span("gemm tile", "compute");
    });
    role.join();
  }
  const wire::JobTrace trace = job_trace_to_wire(recorder, 0, kTraceSpansPerJob);
  ASSERT_EQ(trace.thread_size(), 1);
  EXPECT_EQ(trace.thread(0).name(), "compute 0");
  EXPECT_EQ(trace.thread(0).span_size(), 3);
}

TEST(Trace, ChromeJsonHasAProcessPerPeATrackPerThreadAndValidates) {
  wire::JobRecord job;
  job.set_job_id(7);
  job.set_kind(wire::JOB_KIND_MATMUL);
  for (int pe = 0; pe < 2; ++pe) {
    trace::Recorder recorder;
    {
      const trace::ThreadBinding bound({&recorder, pe}, "main");
      const trace::Scope outer("fused run", "iteration");
      const trace::Scope inner("gemm tile", "compute");
    }
    job.mutable_trace()->MergeFrom(job_trace_to_wire(recorder, pe, 100));
  }
  const nlohmann::json json = chrome_trace_json(job);
  EXPECT_EQ(testing::chrome_trace_problem(json), "");
  int complete = 0;
  double earliest = 1e300;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++complete;
    earliest = std::min(earliest, e["ts"].get<double>());
  }
  EXPECT_EQ(complete, 4);
  EXPECT_EQ(earliest, 0.0);  // microseconds from the job's first span
  EXPECT_EQ(json["otherData"]["job_id"], 7);
}

TEST(Trace, AWaitNamesThePeItWaitedForInTheWireFormAndTheChromeArgs) {
  trace::Recorder recorder;
  {
    const trace::ThreadBinding bound({&recorder, 1}, "main");
    { const trace::Scope wait("wait", "wait", 3); }
    { const trace::Scope wait("wait", "wait"); }  // a word several peers write
  }
  wire::JobRecord job;
  *job.mutable_trace() = job_trace_to_wire(recorder, 0, 100);
  ASSERT_EQ(job.trace().thread(0).span_size(), 2);
  EXPECT_EQ(job.trace().thread(0).span(0).peer(), 3u);
  EXPECT_FALSE(job.trace().thread(0).span(1).has_peer());
  const nlohmann::json json = chrome_trace_json(job);
  EXPECT_EQ(testing::chrome_trace_problem(json), "");
  std::vector<nlohmann::json> waits;
  for (const auto& e : json["traceEvents"]) {
    if (e["ph"] == "X") waits.push_back(e);
  }
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_EQ(waits[0]["args"]["peer"], 3);
  EXPECT_FALSE(waits[1].contains("args"));
}

TEST(Trace, TheCheckerRejectsBrokenTraces) {
  const nlohmann::json good = nlohmann::json::parse(R"({"traceEvents": [
    {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "PE 0"}},
    {"name": "thread_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "main"}},
    {"name": "put", "cat": "comm", "ph": "X", "ts": 1.5, "dur": 2, "pid": 0, "tid": 0},
    {"name": "put", "cat": "comm", "ph": "X", "ts": 4, "dur": 0, "pid": 0, "tid": 0}]})");
  ASSERT_EQ(testing::chrome_trace_problem(good), "");
  auto broken = [&](auto&& change) {
    nlohmann::json copy = good;
    change(copy["traceEvents"]);
    return testing::chrome_trace_problem(copy);
  };
  EXPECT_NE(broken([](auto& e) { e[2].erase("dur"); }), "");
  EXPECT_NE(broken([](auto& e) { e[2]["tid"] = "0"; }), "");
  EXPECT_NE(broken([](auto& e) { e[3]["ts"] = 1.0; }), "");  // back in time
  EXPECT_NE(broken([](auto& e) { e[2]["dur"] = -1; }), "");
  EXPECT_NE(broken([](auto& e) { e.erase(1); }), "");  // a track without a name
  EXPECT_NE(broken([](auto& e) { e[2]["ph"] = "B"; }), "");
  EXPECT_NE(testing::chrome_trace_problem(nlohmann::json::object()), "");
}

TEST(Progress, OnlyTheBoundThreadCounts) {
  progress::JobProgress job;
  progress::step();  // not bound: nothing
  {
    const progress::Binding bound(&job);
    progress::set_total(3);
    progress::step();
    progress::step();
  }
  progress::step();
  EXPECT_EQ(job.total.load(), 3u);
  EXPECT_EQ(job.done.load(), 2u);
}

}  // namespace
}  // namespace symmesh
