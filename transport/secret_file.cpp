#include "transport/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/errors.h"

namespace symmesh {
namespace {

constexpr size_t kMaxSecretBytes = 4096;
constexpr const char* kHowToMake =
    "make one with: head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE";

}  // namespace

std::string read_secret_file(const std::string& path) {
  const std::string name = "secret file '" + path + "'";
  // Checked on the open file, so the file read is the file whose mode was checked.
  // O_NONBLOCK: a FIFO at the path must not hang the start; it is refused below.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    throw InvalidArgument("cannot read " + name + ": " + std::strerror(errno) + " (" + kHowToMake +
                          ")");
  }
  struct stat info {};
  std::string secret;
  std::string problem;
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    problem = "is not a regular file";
  } else if (info.st_uid != geteuid()) {
    problem = "belongs to user id " + std::to_string(info.st_uid) + ", not to this one (" +
              std::to_string(geteuid()) + "): another user could change it (fix: chown)";
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
    size_t have = 0;
    while (have < secret.size()) {  // to the end of the file, however the reads come
      const ssize_t got = ::read(fd, secret.data() + have, secret.size() - have);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) problem = std::string("cannot be read: ") + std::strerror(errno);
      if (got <= 0) break;
      have += size_t(got);
    }
    secret.resize(have);
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
