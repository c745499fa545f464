#include "wire/enum_text.h"

#include <google/protobuf/descriptor.h>

#include <cctype>

#include "common/errors.h"

namespace symmesh::wire {
namespace {

// "CollectiveOp" -> "COLLECTIVE_OP_"
std::string value_prefix(const EnumDescriptor& type) {
  std::string prefix;
  for (const char c : type.name()) {
    if (std::isupper(static_cast<unsigned char>(c)) && !prefix.empty()) prefix += '_';
    prefix += char(std::toupper(static_cast<unsigned char>(c)));
  }
  return prefix + '_';
}

std::string word_of(const EnumDescriptor& type, const std::string& value_name) {
  std::string word = value_name.substr(value_prefix(type).size());
  for (char& c : word) c = c == '_' ? '-' : char(std::tolower(static_cast<unsigned char>(c)));
  return word;
}

std::string joined(const std::vector<std::string>& words) {
  std::string text;
  for (const auto& word : words) text += (text.empty() ? "" : ", ") + word;
  return text;
}

}  // namespace

std::string enum_text(const EnumDescriptor& type, int number) {
  if (number == 0) return "";
  const auto* value = type.FindValueByNumber(number);
  return value ? word_of(type, std::string(value->name())) : "#" + std::to_string(number);
}

int enum_number(const EnumDescriptor& type, std::string_view text) {
  for (int i = 0; i < type.value_count(); ++i) {
    const auto* value = type.value(i);
    if (value->number() != 0 && word_of(type, std::string(value->name())) == text) {
      return value->number();
    }
  }
  return 0;
}

std::vector<std::string> enum_words(const EnumDescriptor& type) {
  std::vector<std::string> words;
  for (int i = 0; i < type.value_count(); ++i) {
    if (type.value(i)->number() != 0)
      words.push_back(word_of(type, std::string(type.value(i)->name())));
  }
  return words;
}

void check_enum(const EnumDescriptor& type, int number, std::string_view what, bool may_be_unset) {
  if (number == 0 ? may_be_unset : type.FindValueByNumber(number) != nullptr) return;
  throw InvalidArgument(std::string(what) +
                        (number == 0 ? " is not set" : " is " + std::to_string(number)) +
                        "; allowed: " + joined(enum_words(type)));
}

int parse_enum(const EnumDescriptor& type, std::string_view text, std::string_view what) {
  const int number = enum_number(type, text);
  if (number != 0) return number;
  throw InvalidArgument(std::string(what) + " '" + std::string(text) +
                        "' is not one of: " + joined(enum_words(type)));
}

}  // namespace symmesh::wire
