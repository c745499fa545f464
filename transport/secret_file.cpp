#include "transport/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/errors.h"

namespace symmesh {
namespace {

constexpr size_t kMaxSecretBytes = 4096;
constexpr const char* kHowToMake =
    "make one with: head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE";

}  // namespace

std::string read_secret_file(const std::string& path) {
  const std::string name = "secret file '" + path + "'";
  // Checked on the open file, so the file read is the file whose mode was checked.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw InvalidArgument("cannot read " + name + ": " + std::strerror(errno) + " (" + kHowToMake +
                          ")");
  }
  struct stat info {};
  std::string secret;
  std::string problem;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    problem = "is not a regular file";
  } else if ((info.st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", unsigned(info.st_mode & 07777));
    problem = std::string("has mode ") + mode +
              ": group or others may read or write it (fix: chmod 600 '" + path + "')";
  } else if (info.st_size > static_cast<off_t>(kMaxSecretBytes)) {
    problem = "has " + std::to_string(info.st_size) + " bytes, above the " +
              std::to_string(kMaxSecretBytes) + " a secret may have";
  } else {
    secret.resize(kMaxSecretBytes);
    const ssize_t got = ::read(fd, secret.data(), secret.size());
    if (got < 0) problem = std::string("cannot be read: ") + std::strerror(errno);
    secret.resize(got < 0 ? 0 : size_t(got));
  }
  ::close(fd);
  if (!problem.empty()) throw InvalidArgument(name + " " + problem);
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.size() < kMinSecretBytes) {
    throw InvalidArgument(name + " holds " + std::to_string(secret.size()) +
                          " bytes; a secret needs at least " + std::to_string(kMinSecretBytes) +
                          " (" + kHowToMake + ")");
  }
  return secret;
}

}  // namespace symmesh
