// The words people use for the wire's enum values. Every enum of the protocol names its values
// <ENUM>_<VALUE> (COLLECTIVE_OP_REDUCE_SCATTER) with 0 the unset value; the word is VALUE in
// lower case with '-' for '_' ("reduce-scatter"). The CLI's flags, the JSON output, the status
// page and the daemon's error messages all read and write these words, so the enum in the
// .proto file is the one list of what is allowed.
#pragma once

#include <google/protobuf/generated_enum_reflection.h>

#include <string>
#include <string_view>
#include <vector>

namespace symmesh::wire {

using google::protobuf::EnumDescriptor;

// The word for `number` ("" for 0, the unset value; "#N" for a number the enum does not name).
std::string enum_text(const EnumDescriptor& type, int number);
// The number `text` names, or 0 when it names none (the unset value is not a word).
int enum_number(const EnumDescriptor& type, std::string_view text);
// Every word but the unset value's, in declaration order.
std::vector<std::string> enum_words(const EnumDescriptor& type);
// `number` as a value `what` may take: throws InvalidArgument "<what> is N; allowed: a, b, c"
// for a number the enum does not name (a newer peer's, or garbage) or, unless `may_be_unset`,
// for 0.
void check_enum(const EnumDescriptor& type, int number, std::string_view what, bool may_be_unset);

template <class E>
const EnumDescriptor& descriptor_of() {
  return *google::protobuf::GetEnumDescriptor<E>();
}

template <class E>
std::string enum_text(E value) {
  return enum_text(descriptor_of<E>(), int(value));
}

template <class E>
std::vector<std::string> enum_words() {
  return enum_words(descriptor_of<E>());
}

template <class E>
void check_enum(E value, std::string_view what, bool may_be_unset = false) {
  check_enum(descriptor_of<E>(), int(value), what, may_be_unset);
}

// The number `text` names; throws InvalidArgument "<what> 'text' is not one of: a, b, c".
int parse_enum(const EnumDescriptor& type, std::string_view text, std::string_view what);

template <class E>
E parse_enum(std::string_view text, std::string_view what) {
  return E(parse_enum(descriptor_of<E>(), text, what));
}

}  // namespace symmesh::wire
