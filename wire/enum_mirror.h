// C++ enums that mirror a wire enum. The runtime's and the operators' own enums (DType,
// BarrierAlgo, FusedMode, ...) take their wire enum's numbers as their values, so that their
// words, their parsing and their conversion from a message all come from the .proto file, the
// one list of what is allowed. A mirror covers a run of the wire enum's numbers: CollAlgo is
// CollectiveAlgo's ring and hier, not its auto or direct. Each layer names its mirrors in one
// header (runtime/enum_words.h, ops/enum_words.h), with a static_assert per value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/errors.h"
#include "wire/enum_text.h"

namespace symmesh::wire {

// Specialised once per mirrored enum E: `using type = <its wire enum>;` and the numbers it
// covers, `static constexpr int kFirst, kLast`.
template <class E>
struct MirrorOf;

template <class E>
using mirror_t = typename MirrorOf<E>::type;

// E's word ("bf16").
template <class E>
std::string word(E value) {
  return enum_text(descriptor_of<mirror_t<E>>(), int(value));
}

// Every E's word, in order: "f32, bf16, f16".
template <class E>
std::string word_list() {
  std::string list;
  for (int n = MirrorOf<E>::kFirst; n <= MirrorOf<E>::kLast; ++n) {
    list += (list.empty() ? "" : ", ") + word(E(n));
  }
  return list;
}

template <class E>
bool covers(int number) {
  return number >= MirrorOf<E>::kFirst && number <= MirrorOf<E>::kLast;
}

// The E that `text` names; throws InvalidArgument "<what> 'text' is not one of: a, b, c".
template <class E>
E parse_word(std::string_view text, std::string_view what) {
  const int number = enum_number(descriptor_of<mirror_t<E>>(), text);
  if (covers<E>(number)) return E(number);
  throw InvalidArgument(std::string(what) + " '" + std::string(text) +
                        "' is not one of: " + word_list<E>());
}

// A message's number as E: `unset` for 0; throws InvalidArgument "<what> is 'word' (or N);
// allowed: a, b" for any number E does not cover.
template <class E>
E from_wire(int number, E unset, std::string_view what) {
  if (number == 0) return unset;
  if (covers<E>(number)) return E(number);
  throw InvalidArgument(std::string(what) + " is '" +
                        enum_text(descriptor_of<mirror_t<E>>(), number) +
                        "'; allowed: " + word_list<E>());
}

template <class E>
mirror_t<E> to_wire(E value) {
  return mirror_t<E>(int(value));
}

}  // namespace symmesh::wire
