// A job's result as `--json` prints it: the fields every kind has, then the kind's own figures
// under their names, an absent optional figure as null.
#include <gtest/gtest.h>

#include "wire/json.h"

namespace symmesh {
namespace {

wire::JobResult collective_result() {
  wire::JobResult result;
  result.set_ok(true);
  result.set_job_id(7);
  result.set_kind(wire::JOB_KIND_COLLECTIVE);
  result.set_op("allreduce");
  result.set_dtype("f32");
  result.set_algo("ring");
  wire::CollectiveFigures& f = *result.mutable_figures()->mutable_collective();
  f.set_bytes(4096);
  f.set_algbw_gbps(1.5);
  f.set_busbw_gbps(2.25);
  return result;
}

TEST(JobJson, EveryFigureOfTheKindPrintsUnderItsName) {
  const nlohmann::json json = job_result_json(collective_result());
  EXPECT_EQ(json["kind"], "collective");
  EXPECT_EQ(json["op"], "allreduce");
  EXPECT_EQ(json["bytes"], 4096);
  EXPECT_EQ(json["algbw_gbps"], 1.5);
  EXPECT_EQ(json["busbw_gbps"], 2.25);
  EXPECT_FALSE(json.contains("transport")) << json.dump();  // another kind's figure
}

TEST(JobJson, VerificationNotAskedForIsNull) {
  wire::JobResult result = collective_result();
  EXPECT_TRUE(job_result_json(result)["verified"].is_null());
  result.set_verify_requested(true);
  result.set_verified(true);
  result.set_max_abs_err(0.5);
  const nlohmann::json json = job_result_json(result);
  EXPECT_EQ(json["verified"], true);
  EXPECT_EQ(json["max_abs_err"], 0.5);
}

TEST(JobJson, AnOptionalFigureLeftOutIsNullAndAnEnumIsItsWord) {
  wire::JobResult result;
  result.set_ok(true);
  result.set_kind(wire::JOB_KIND_MATMUL);
  wire::MatmulFigures& f = *result.mutable_figures()->mutable_matmul();
  f.set_mode(wire::MATMUL_MODE_SEQUENTIAL);
  f.set_sequential_s(0.25);
  nlohmann::json json = job_result_json(result);
  EXPECT_EQ(json["mode"], "sequential");
  EXPECT_EQ(json["sequential_s"], 0.25);
  EXPECT_TRUE(json["pipelined_s"].is_null()) << json.dump();
  EXPECT_TRUE(json["speedup"].is_null());
  EXPECT_TRUE(json["planned"].is_null());
  EXPECT_EQ(json["compute_s"], 0.0);  // a plain field prints even when zero

  f.set_speedup(0.0);  // measured, and zero
  EXPECT_EQ(job_result_json(result)["speedup"], 0.0);
}

// Every kind's figures message prints: each of its fields is a key of the JSON.
TEST(JobJson, EveryKindsFiguresPrintEachField) {
  const auto& kinds = *wire::KindFigures::descriptor()->FindOneofByName("kind");
  ASSERT_GE(kinds.field_count(), 4);
  for (int k = 0; k < kinds.field_count(); ++k) {
    wire::JobResult result = collective_result();
    wire::KindFigures& figures = *result.mutable_figures();
    const auto& type = *kinds.field(k)->message_type();
    figures.GetReflection()->MutableMessage(&figures, kinds.field(k));  // select this kind
    const nlohmann::json json = job_result_json(result);
    for (int i = 0; i < type.field_count(); ++i) {
      EXPECT_TRUE(json.contains(type.field(i)->name())) << type.full_name() << " " << json.dump();
    }
  }
}

TEST(JobJson, AResultWithoutAKindIsItsStatusAndError) {
  wire::JobResult result;
  result.set_ok(false);
  result.set_error("job has no kind");
  EXPECT_EQ(job_result_json(result),
            (nlohmann::json{{"status", "error"}, {"error", "job has no kind"}}));
}

}  // namespace
}  // namespace symmesh
