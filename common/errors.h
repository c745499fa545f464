// The exceptions symmesh throws. Every message names what was wrong and what is allowed.
#pragma once

#include <stdexcept>
#include <string>

namespace symmesh {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A caller passed something outside the documented range (shape, size, flag, address).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A wait passed its deadline; the message names the PE, what it waited for and what it saw.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The job this wait belonged to was aborted (a peer died, another PE failed, shutdown).
class AbortedError : public Error {
 public:
  using Error::Error;
};

// A connection or peer failed: closed, refused, or sent something invalid.
class PeerError : public Error {
 public:
  using Error::Error;
};

// A handshake failed. kind() says how a server counts it: "auth" (a proof that does not
// match the cluster secret) or "bad_request" (a wrong version, role or malformed hello).
class AuthError : public Error {
 public:
  explicit AuthError(const std::string& what, std::string kind = "auth")
      : Error(what), kind_(std::move(kind)) {}
  const std::string& kind() const { return kind_; }

 private:
  std::string kind_;
};

}  // namespace symmesh
