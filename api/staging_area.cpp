#include "api/staging_area.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "api/request_ring.h"
#include "common/errors.h"

namespace symmesh::attach {

StagingArea::StagingArea(int ring_fd) : fd_(ring_fd) {}

StagingArea::~StagingArea() {
  if (std::byte* data = data_.load()) munmap(data, kMaxStagingBytes);
  ::close(fd_);
}

void StagingArea::map(uint64_t bytes) {
  const uint64_t mapped = bytes_.load(std::memory_order_acquire);
  if (bytes <= mapped) return;
  const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
  if (bytes % page != 0 || bytes > kMaxStagingBytes) {
    throw Error("a staging area of " + std::to_string(bytes) + " bytes: allowed whole " +
                std::to_string(page) + "-byte pages up to " + std::to_string(kMaxStagingBytes));
  }
  std::byte* data = data_.load();
  if (!data) {
    void* reserved = mmap(nullptr, kMaxStagingBytes, PROT_NONE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (reserved == MAP_FAILED) {
      throw Error("reserving " + std::to_string(kMaxStagingBytes) +
                  " bytes of address space for a staging area failed: " + std::strerror(errno));
    }
    data = static_cast<std::byte*>(reserved);
    data_.store(data);
  }
  // Only the new tail: what is mapped stays where it is, under any pointer into it.
  if (mmap(data + mapped, bytes - mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd_,
           off_t(kRingBytes + mapped)) == MAP_FAILED) {
    const int error = errno;
    // A failed MAP_FIXED may have unmapped the tail: reserve it again, so nothing else lands
    // inside the area's address space.
    mmap(data + mapped, bytes - mapped, PROT_NONE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    throw Error("mapping a staging area of " + std::to_string(bytes) +
                " bytes failed: " + std::strerror(error));
  }
  bytes_.store(bytes, std::memory_order_release);
}

void StagingArea::grow(uint64_t bytes, const char* what) {
  if (bytes <= this->bytes()) return;
  if (bytes > kMaxStagingBytes) {
    throw InvalidArgument(std::string(what) + " needs " + std::to_string(bytes) +
                          " bytes of staging; allowed up to " + std::to_string(kMaxStagingBytes) +
                          " (pass tensors made with empty() to skip staging, or smaller ones)");
  }
  uint64_t size = uint64_t{1} << 20;
  while (size < bytes) size *= 2;
  // The process may have grown the memfd itself (the seal forbids only shrinking): make it
  // longer only when it is shorter.
  struct stat file;
  if (fstat(fd_, &file) != 0)
    throw Error(std::string("fstat(staging) failed: ") + std::strerror(errno));
  if (uint64_t(file.st_size) < kRingBytes + size && ftruncate(fd_, off_t(kRingBytes + size)) != 0) {
    throw Error("growing a staging area to " + std::to_string(size) +
                " bytes failed: " + std::strerror(errno));
  }
  map(size);
}

std::byte* StagingArea::range(uint64_t offset, uint64_t bytes, const char* what) const {
  const uint64_t mapped = this->bytes();
  if (offset > mapped || bytes > mapped - offset) {
    throw InvalidArgument(std::string(what) + ": bytes [" + std::to_string(offset) + ", " +
                          std::to_string(offset) + " + " + std::to_string(bytes) +
                          ") are outside the staging area of " + std::to_string(mapped));
  }
  return data_.load() + offset;
}

}  // namespace symmesh::attach
