#include "runtime/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/errors.h"

namespace symmesh {

SharedSegment::SharedSegment(size_t bytes, const std::string& name) : size_(bytes) {
  fd_ = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd_ < 0) throw Error("memfd_create(" + name + ") failed: " + std::strerror(errno));
  if (ftruncate(fd_, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    close(fd_);
    throw Error("cannot size the symmetric heap to " + std::to_string(bytes) +
                " bytes: " + std::strerror(error));
  }
  // Sealed at its size: a process it is passed to (api/session.h) cannot shrink it under the
  // daemon, whose next touch past the end would be a SIGBUS.
  if (fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int error = errno;
    close(fd_);
    throw Error("cannot seal the symmetric heap's memfd: " + std::string(std::strerror(error)));
  }
  void* address = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (address == MAP_FAILED) {
    const int error = errno;
    close(fd_);
    throw Error("cannot map the symmetric heap of " + std::to_string(bytes) +
                " bytes: " + std::strerror(error));
  }
  base_ = static_cast<std::byte*>(address);
}

SharedSegment::~SharedSegment() {
  if (base_) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
}

}  // namespace symmesh
