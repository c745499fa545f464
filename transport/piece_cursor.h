// A gathered put's pieces taken in order, a frame or a write at a time: each take() is the next
// `length` bytes of them, as the (non-empty) parts of the pieces that hold those bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>

#include "transport/transport.h"

namespace symmesh {

class PieceCursor {
 public:
  explicit PieceCursor(std::span<const PutPiece> pieces) : pieces_(pieces) {}

  // Calls part(data, n) for each part of the next `length` bytes; `length` must not pass the
  // pieces' end.
  template <class Part>
  void take(size_t length, Part part) {
    while (length > 0) {
      const PutPiece& piece = pieces_[index_];
      const size_t n = std::min(length, piece.length - at_);
      if (n > 0) part(static_cast<const std::byte*>(piece.data) + at_, n);
      at_ += n;
      length -= n;
      if (at_ == piece.length) {
        ++index_;
        at_ = 0;
      }
    }
  }
  // The next `length` bytes lie in one piece: where they start, else nullptr (nothing taken).
  const std::byte* take_contiguous(size_t length) {
    while (index_ < pieces_.size() && at_ == pieces_[index_].length) {  // skip empty pieces
      ++index_;
      at_ = 0;
    }
    if (index_ == pieces_.size() || pieces_[index_].length - at_ < length) return nullptr;
    const std::byte* start = static_cast<const std::byte*>(pieces_[index_].data) + at_;
    take(length, [](const std::byte*, size_t) {});
    return start;
  }

 private:
  std::span<const PutPiece> pieces_;
  size_t index_ = 0;  // the piece the next take starts in
  size_t at_ = 0;     // and where in it
};

}  // namespace symmesh
