// libFuzzer: symmeshd's TOML configuration (--config FILE), the same keys as its flags.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/errors.h"
#include "daemon/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("fuzz.toml", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (write(fd, data, size) == ssize_t(size)) {
    std::string path = "/proc/self/fd/" + std::to_string(fd);
    std::string name = "symmeshd", flag = "--config";
    char* argv[] = {name.data(), flag.data(), path.data(), nullptr};
    try {
      symmesh::parse_daemon_config(3, argv);
    } catch (const symmesh::Error&) {
    }
  }
  close(fd);
  return 0;
}
