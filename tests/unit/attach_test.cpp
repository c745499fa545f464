// Attaching processes to a node's PEs, in one test process: a real one-node Node with two
// PEs, the real attach socket, and the session job's PE threads serving each "process" (a
// thread holding a Session over its own connection). Checks the heap is shared (a tensor the
// process fills is what the collective reduces), that a PE takes one process, that a process
// leaving without detaching ends the session naming it and frees the PE, and that wrong calls
// and wrong attaches are refused saying why.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <thread>
#include <vector>

#include "api/session.h"
#include "common/errors.h"
#include "daemon/attach/attach_server.h"
#include "daemon/jobs/job.h"
#include "tests/support/attached_node.h"
#include "wire/attach.pb.h"

namespace symmesh {
namespace {

using Attached = AttachedNode;

TEST_F(Attached, ProcessesReduceTheirHeapTensorsInPlaceAndDetach) {
  auto pes = start_session();
  const auto outs = run_processes([](Session& session, int local) {
    EXPECT_EQ(session.place().rank, local);
    EXPECT_EQ(session.place().world_size, 2);
    auto* x = static_cast<float*>(session.malloc(1000 * sizeof(float)));
    for (int i = 0; i < 1000; ++i) x[i] = float(local + 1) * float(i);
    session.ping();
    session.barrier();
    session.all_reduce(x, 1000, wire::DATA_TYPE_F32);
    std::vector<float> out(x, x + 1000);
    session.free(x);
    return out;
  });
  for (const std::vector<float>& out : outs) {
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(out[i], 3.0f * float(i)) << "element " << i;
  }
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
  EXPECT_EQ(node_.heap_used(), 0u) << "the tensors were freed";
}

TEST_F(Attached, APeTakesOneProcessAndASecondIsToldWhoHoldsIt) {
  auto first = attach(0);
  try {
    attach(0);
    FAIL() << "a second process took local rank 0";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("held by pid " + std::to_string(getpid())),
              std::string::npos)
        << e.what();
  }
  try {
    attach(2);
    FAIL() << "local rank 2 of 2 was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("outside 0..1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(refusals_, (std::vector<std::string>{"bad_request", "bad_request"}));
}

TEST_F(Attached, ALocalRankPastTheIntRangeIsRefusedAsItWasSent) {
  auto connection = BlockingChannel::connect(LocalPath{server_.path()}, deadline_after(kTimeout));
  wire::AttachRequest request;
  request.set_protocol_version(attach::kAttachProtocolVersion);
  request.set_local_rank(0xffffffffu);  // -1 as an int
  connection->write(request, deadline_after(kTimeout));
  wire::AttachReply reply;
  connection->read(reply, deadline_after(kTimeout));
  EXPECT_FALSE(reply.ok());
  EXPECT_EQ(reply.error(), "local rank 4294967295 is outside 0..1");
  EXPECT_EQ(refusals_, (std::vector<std::string>{"bad_request"}));
}

TEST_F(Attached, AnOldProtocolIsRefusedNamingBothVersions) {
  auto connection = BlockingChannel::connect(LocalPath{server_.path()}, deadline_after(kTimeout));
  wire::AttachRequest request;
  request.set_protocol_version(attach::kAttachProtocolVersion + 1);
  connection->write(request, deadline_after(kTimeout));
  wire::AttachReply reply;
  connection->read(reply, deadline_after(kTimeout));
  EXPECT_FALSE(reply.ok());
  const std::string versions = "the daemon speaks " +
                               std::to_string(attach::kAttachProtocolVersion) + ", the process " +
                               std::to_string(attach::kAttachProtocolVersion + 1);
  EXPECT_NE(reply.error().find(versions), std::string::npos) << reply.error();
}

TEST_F(Attached, AProcessThatLeavesWithoutDetachingEndsTheSessionNamingItAndFreesItsPe) {
  auto pes = start_session();
  auto survivor = survivor_in_barrier(1);
  {
    // A process that dies: attached, then its connection closes with no detach.
    auto [connection, fds] = attach_by_hand(0);
    ASSERT_EQ(fds.size(), 2u);
    // It dies once its PE serves it (dying earlier only leaves the PE waiting for another).
    void* mapped = mmap(nullptr, attach::kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
    ASSERT_NE(mapped, MAP_FAILED);
    const auto& ring = *static_cast<const attach::Ring*>(mapped);
    const Deadline until = deadline_after(kTimeout);
    while (!ring.serving.load() && Clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // bounded by `until`
    }
    EXPECT_TRUE(ring.serving.load()) << "PE 0 never served the process";
    munmap(mapped, attach::kRingBytes);
    for (const int fd : fds) ::close(fd);
  }
  ASSERT_EQ(pes[0].wait_for(kTimeout), std::future_status::ready);
  const std::string why = pes[0].get();
  EXPECT_NE(why.find("exited without detaching"), std::string::npos) << why;
  ASSERT_EQ(survivor.wait_for(kTimeout), std::future_status::ready);
  EXPECT_NE(survivor.get().find("the session ended"), std::string::npos);
  ASSERT_EQ(pes[1].wait_for(kTimeout), std::future_status::ready);
  pes[1].get();
  // The PE is free again once the reaper saw the connection close.
  node_.doorbell().clear_abort();
  std::unique_ptr<Session> again;
  for (const Deadline until = deadline_after(kTimeout); !again && Clock::now() < until;) {
    try {
      again = attach(0);
    } catch (const InvalidArgument&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the reaper's next pass
    }
  }
  EXPECT_TRUE(again) << "local rank 0 stayed held after its process went away";
}

TEST_F(Attached, AMisalignedTensorIsRefusedBeforeAnythingIsSentAndTheSessionGoesOn) {
  auto pes = start_session();
  const auto said = run_processes([](Session& session, int local) {
    auto* x = static_cast<float*>(session.malloc(17 * sizeof(float)));
    auto* odd = reinterpret_cast<float*>(reinterpret_cast<std::byte*>(x) + 2);
    std::vector<float> out;
    try {
      session.all_reduce(odd, 16, wire::DATA_TYPE_F32);
      out.push_back(-1.0f);  // taken: fails the check below
    } catch (const InvalidArgument& e) {
      const std::string said = e.what();
      EXPECT_NE(said.find("all_reduce's input (heap offset"), std::string::npos) << said;
      EXPECT_NE(said.find("must be aligned to the 4-byte element"), std::string::npos) << said;
    }
    for (int i = 0; i < 16; ++i) x[i] = float(local + 1);
    session.all_reduce(x, 16, wire::DATA_TYPE_F32);  // the session still serves
    out.insert(out.end(), x, x + 16);
    session.free(x);
    return out;
  });
  for (const std::vector<float>& out : said) EXPECT_EQ(out, std::vector<float>(16, 3.0f));
  EXPECT_EQ(endings(pes), std::vector<std::string>(2, "ok"));
}

TEST_F(Attached, ATensorOffTheHeapIsRefusedBeforeAnythingIsSent) {
  auto session = attach(0);
  float local[4] = {};
  try {
    session->all_reduce(local, 4, wire::DATA_TYPE_F32);
    FAIL() << "a stack array was taken";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("not on this PE's symmetric heap"), std::string::npos);
  }
}

}  // namespace
}  // namespace symmesh
