// A real one-node Node with two PEs and its attach socket, in one test process: the session
// job's PE threads serve each "process" (a thread holding a Session over its own connection).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <future>
#include <string>
#include <type_traits>
#include <vector>

#include "api/session.h"
#include "common/errors.h"
#include "daemon/attach/attach_server.h"
#include "daemon/jobs/job.h"
#include "wire/attach.pb.h"

namespace symmesh {

inline constexpr auto kTimeout = std::chrono::seconds(20);

// "" when `call` throws InvalidArgument saying both `says` and `and_says`; else what it did.
template <class Call>
std::string refusal_missing(Call&& call, const std::string& says, const std::string& and_says) {
  try {
    call();
  } catch (const InvalidArgument& e) {
    const std::string what = e.what();
    const bool named =
        what.find(says) != std::string::npos && what.find(and_says) != std::string::npos;
    return named ? "" : what;
  }
  return "accepted";
}

inline NodeConfig two_pes() {
  NodeConfig config;
  config.ranks_per_node = 2;
  config.heap_size = 2 * (size_t{16} << 20);
  config.wait_timeout = std::chrono::seconds(20);
  return config;
}

class AttachedNode : public ::testing::Test {
 protected:
  AttachedNode()
      : directory_(temporary_directory()),
        node_(two_pes()),
        server_(node_, directory_, {},
                [this](const std::string& kind) { refusals_.push_back(kind); }) {}
  ~AttachedNode() override {
    server_.stop();
    std::filesystem::remove_all(directory_);
  }

  static std::string temporary_directory() {
    std::string pattern = "/tmp/symmesh-attach.XXXXXX";
    if (!mkdtemp(pattern.data())) throw Error("mkdtemp failed");
    return pattern;
  }

  // The session job on every PE of the node, as the node agent runs it: one thread each.
  // `call_memory_bytes` is what the agent sets from --job-memory (0: no cap but staging's).
  std::vector<std::future<std::string>> start_session(uint64_t call_memory_bytes = 0) {
    wire::JobSpec spec;
    spec.mutable_session()->set_attach_timeout_s(20);
    spec.mutable_session()->set_call_memory_bytes(call_memory_bytes);
    std::vector<std::future<std::string>> pes;
    for (int local = 0; local < node_.ranks_per_node(); ++local) {
      pes.push_back(std::async(std::launch::async, [this, spec, local]() -> std::string {
        try {
          Pe pe(node_, local);
          job_kind_of(spec).run_on_pe(pe, spec);
          return "ok";
        } catch (const std::exception& e) {
          node_.doorbell().abort("a PE failed");
          return e.what();
        }
      }));
    }
    return pes;
  }

  // One thread per PE, each attached as its local rank and running `process(session, rank)`;
  // what each returned, in local-rank order. A process still running after kTimeout fails the
  // test.
  template <class Process>
  auto run_processes(Process process) {
    using Result = std::invoke_result_t<Process&, Session&, int>;
    std::vector<std::future<Result>> running;
    for (int local = 0; local < node_.ranks_per_node(); ++local) {
      running.push_back(std::async(std::launch::async, [this, &process, local] {
        auto session = attach(local);
        return process(*session, local);
      }));
    }
    return results_of(running, "an attached process");
  }

  // A call every PE refused with an error that ends the session: the first PE to refuse it
  // aborts the node, so a peer still inside the call may end by that abort instead. Each of
  // `outcomes` says `says` or names the abort, and one at least says `says`.
  static void expect_named_or_aborted(const std::vector<std::string>& outcomes,
                                      const std::string& says) {
    size_t named = 0;
    for (const std::string& outcome : outcomes) {
      named += outcome.find(says) != std::string::npos;
      EXPECT_TRUE(outcome.find(says) != std::string::npos ||
                  outcome.find("a PE failed") != std::string::npos)
          << outcome;
    }
    EXPECT_GE(named, 1u);
  }

  // How each PE's session job ended: "ok", or its error.
  static std::vector<std::string> endings(std::vector<std::future<std::string>>& pes) {
    return results_of(pes, "a PE's session job");
  }

  template <class Result>
  static std::vector<Result> results_of(std::vector<std::future<Result>>& futures,
                                        const std::string& what) {
    std::vector<Result> results;
    for (auto& future : futures) {
      if (future.wait_for(kTimeout) != std::future_status::ready) {
        throw Error(what + " did not finish within " + std::to_string(kTimeout.count()) + " s");
      }
      results.push_back(future.get());
    }
    return results;
  }

  std::unique_ptr<Session> attach(int local_rank) {
    return Session::attach(server_.path(), local_rank, kTimeout);
  }

  // A process on `local_rank`, attached before this returns (a process attaching after its
  // session ended would wait for the next session), in a barrier whose partner will break the
  // session: what the barrier ended with.
  std::future<std::string> survivor_in_barrier(int local_rank) {
    auto attached = std::make_shared<std::promise<void>>();
    auto ready = attached->get_future();
    auto survivor = std::async(std::launch::async, [this, attached, local_rank]() -> std::string {
      auto session = attach(local_rank);
      attached->set_value();
      try {
        session->barrier();
        return "the barrier passed";
      } catch (const PeerError& e) {
        return e.what();
      }
    });
    if (ready.wait_for(kTimeout) != std::future_status::ready) {
      throw Error("the survivor did not attach to local rank " + std::to_string(local_rank) +
                  " within " + std::to_string(kTimeout.count()) + " s");
    }
    return survivor;
  }

  // A process attached by hand (its request, the reply, the segment and ring descriptors).
  struct RawAttach {
    std::unique_ptr<BlockingChannel> connection;
    std::vector<int> fds;
  };
  RawAttach attach_by_hand(int local_rank) {
    RawAttach raw{BlockingChannel::connect(LocalPath{server_.path()}, deadline_after(kTimeout)),
                  {}};
    wire::AttachRequest request;
    request.set_protocol_version(attach::kAttachProtocolVersion);
    request.set_local_rank(local_rank);
    raw.connection->write(request, deadline_after(kTimeout));
    wire::AttachReply reply;
    raw.connection->read(reply, deadline_after(kTimeout));
    EXPECT_TRUE(reply.ok()) << reply.error();
    raw.fds = raw.connection->receive_fds(2, deadline_after(kTimeout));
    return raw;
  }

  std::string directory_;
  Node node_;
  std::vector<std::string> refusals_;
  AttachServer server_;
};

}  // namespace symmesh
