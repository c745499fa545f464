// The cluster secret, read from a file the way SSH reads a private key: refused when group
// or others may read or write it, or when it is too short to be a secret.
#pragma once

#include <string>

namespace symmesh {

inline constexpr size_t kMinSecretBytes = 16;

// Returns the secret (trailing newlines dropped). Throws InvalidArgument naming the file,
// what is wrong with it and how to fix it.
std::string read_secret_file(const std::string& path);

}  // namespace symmesh
