// A kind of job as `symmesh submit KIND` offers it: its options as rows of a table (flag, the
// field of the job message it sets, help, default, what it accepts), and how its result reads
// for people; one file per kind.
// Values reach the message by protobuf reflection, so a row is all a new option needs, and
// adding a kind is one table and one line in submit_kinds().
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "wire/enum_text.h"
#include "wire/jobs.pb.h"

namespace symmesh {

struct JobOption {
  std::string flag;   // "--tokens"
  std::string field;  // the field of the kind's message it sets: "tokens" (a bool: a switch)
  std::string help;
  std::string fallback = "";                             // set when not given ("": none)
  std::optional<CLI::Validator> accepts = std::nullopt;  // checked before anything is sent
  bool required = false;
  bool size = false;  // a byte size with a suffix ("64KiB")
};

struct SubmitKind {
  std::string name;  // the subcommand: "matmul"
  std::string help;
  std::string message;  // the JobSpec field of this kind: "matmul"
  std::map<std::string, std::string> fixed =
      {};  // enum fields the kind sets itself, by word ({"op", "dispatch"})
  std::vector<JobOption> options = {};
  // Prints a successful result of this kind for people (--json is the same for every kind).
  std::function<void(const wire::JobResult&)> print = nullptr;
};

// Every kind, in the order `symmesh submit --help` lists them (one file each).
std::vector<SubmitKind> submit_kinds();
SubmitKind barrier_kind();
SubmitKind collective_kind();
SubmitKind transport_kind();
SubmitKind matmul_kind();
SubmitKind moe_kind(const std::string& op);  // dispatch or combine

// "  verified (max abs err E)" or "  NOT VERIFIED (...)" when the job asked to verify; else "".
std::string verification(const wire::JobResult& result);
// "2 nodes x 4 PEs"
std::string shape_text(const wire::JobResult& result);

// What rows accept.
CLI::Validator one_of(std::vector<std::string> choices);
CLI::Validator in_range(uint64_t low, uint64_t high);

// The job a kind describes with `values` (flag -> text; a switch is "true" when given; a flag
// missing or empty takes its row's fallback).
// Throws InvalidArgument naming the flag of a value that does not fit its field.
wire::JobSpec make_spec(const SubmitKind& kind, const std::map<std::string, std::string>& values);

// A kind registered under `submit`: the values parsed into it, and the job they describe.
class SubmitCommand {
 public:
  SubmitCommand(CLI::App& submit, SubmitKind kind);
  CLI::App* app() const { return app_; }
  bool parsed() const { return app_->parsed(); }
  wire::JobSpec spec() const;

 private:
  SubmitKind kind_;
  CLI::App* app_;
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> switches_;
};

}  // namespace symmesh
