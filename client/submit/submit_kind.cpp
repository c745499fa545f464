#include "client/submit/submit_kind.h"

#include <algorithm>
#include <cstdio>

#include "common/errors.h"
#include "common/units.h"

namespace symmesh {
namespace {

using google::protobuf::FieldDescriptor;

const FieldDescriptor& field_of(const google::protobuf::Message& message, const std::string& name) {
  const FieldDescriptor* field = message.GetDescriptor()->FindFieldByName(name);
  if (!field) {
    throw InvalidArgument(message.GetDescriptor()->full_name() + " has no field '" + name + "'");
  }
  return *field;
}

// An enum field takes the word of one of its values (wire/enum_text.h).
void set_enum(google::protobuf::Message& message, const FieldDescriptor& field,
              const std::string& text, const std::string& what) {
  message.GetReflection()->SetEnumValue(&message, &field,
                                        wire::parse_enum(*field.enum_type(), text, what));
}

void set_field(google::protobuf::Message& message, const JobOption& row, const std::string& text) {
  const FieldDescriptor& field = field_of(message, row.field);
  const auto* reflection = message.GetReflection();
  auto number = [&](uint64_t max) {
    if (!row.size) return parse_count(text, row.flag, 0, max);
    const uint64_t bytes = parse_size(text, row.flag);
    if (bytes > max)
      throw InvalidArgument(row.flag + ": '" + text + "' is above " + format_bytes(max));
    return bytes;
  };
  switch (field.cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      reflection->SetString(&message, &field, text);
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      set_enum(message, field, text, row.flag);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      reflection->SetBool(&message, &field, text == "true");
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      reflection->SetUInt32(&message, &field, uint32_t(number(UINT32_MAX)));
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      reflection->SetUInt64(&message, &field, number(UINT64_MAX));
      break;
    default:
      throw InvalidArgument(row.flag + ": field '" + row.field + "' is of a type no option sets");
  }
}

}  // namespace

std::vector<SubmitKind> submit_kinds() {
  return {barrier_kind(), collective_kind(),    transport_kind(),
          matmul_kind(),  moe_kind("dispatch"), moe_kind("combine")};
}

std::string verification(const wire::JobResult& result) {
  if (!result.verify_requested()) return "";
  char text[96];
  std::snprintf(text, sizeof(text), "  %s (max abs err %g)",
                result.verified() ? "verified" : "NOT VERIFIED", result.max_abs_err());
  return text;
}

std::string shape_text(const wire::JobResult& result) {
  return std::to_string(result.nodes()) + " nodes x " +
         std::to_string(result.pes() / std::max(1u, result.nodes())) + " PEs";
}

CLI::Validator one_of(std::vector<std::string> choices) {
  return CLI::IsMember(std::move(choices));
}

CLI::Validator in_range(uint64_t low, uint64_t high) {
  return CLI::Range(low, high);
}

wire::JobSpec make_spec(const SubmitKind& kind, const std::map<std::string, std::string>& values) {
  wire::JobSpec spec;
  const FieldDescriptor& which = field_of(spec, kind.message);
  google::protobuf::Message& message = *spec.GetReflection()->MutableMessage(&spec, &which);
  for (const auto& [field, text] : kind.fixed)
    set_enum(message, field_of(message, field), text, field);
  for (const JobOption& row : kind.options) {
    const auto given = values.find(row.flag);
    const bool named = given != values.end() && !given->second.empty();
    const std::string& text = named ? given->second : row.fallback;
    if (!text.empty()) set_field(message, row, text);
  }
  return spec;
}

SubmitCommand::SubmitCommand(CLI::App& submit, SubmitKind kind)
    : kind_(std::move(kind)), app_(submit.add_subcommand(kind_.name, kind_.help)) {
  const google::protobuf::Message& prototype =
      wire::JobSpec::default_instance().GetReflection()->GetMessage(
          wire::JobSpec::default_instance(),
          &field_of(wire::JobSpec::default_instance(), kind_.message));
  for (const JobOption& row : kind_.options) {
    const auto type = field_of(prototype, row.field).cpp_type();
    if (type == FieldDescriptor::CPPTYPE_BOOL) {
      app_->add_flag(row.flag, switches_[row.flag], row.help);
      continue;
    }
    CLI::Option* option = app_->add_option(row.flag, values_[row.flag], row.help);
    const bool words = type == FieldDescriptor::CPPTYPE_ENUM;
    option->type_name(row.size                                           ? "SIZE"
                      : type == FieldDescriptor::CPPTYPE_STRING || words ? "TEXT"
                                                                         : "UINT");
    if (row.required) option->required();
    if (row.accepts) {
      option->check(*row.accepts);
    } else if (words) {  // every value of the enum
      option->check(one_of(wire::enum_words(*field_of(prototype, row.field).enum_type())));
    }
    if (!row.fallback.empty()) option->default_str(row.fallback);
  }
}

wire::JobSpec SubmitCommand::spec() const {
  std::map<std::string, std::string> values = values_;
  for (const auto& [flag, on] : switches_) {
    if (on) values[flag] = "true";
  }
  return make_spec(kind_, values);
}

}  // namespace symmesh
