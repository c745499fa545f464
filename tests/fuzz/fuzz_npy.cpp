// libFuzzer: the .npy reader, on files a job's --inputs may name.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/errors.h"
#include "ops/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("fuzz.npy", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (write(fd, data, size) == ssize_t(size)) {
    try {
      const symmesh::NpyArray array = symmesh::read_npy("/proc/self/fd/" + std::to_string(fd));
      (void)array;
    } catch (const symmesh::Error&) {
    }
  }
  close(fd);
  return 0;
}
