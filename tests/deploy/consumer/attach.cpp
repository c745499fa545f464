// A program outside the tree on the installed libsymmesh (symmesh::symmesh, or pkg-config):
// outside `symmesh launch` it must be told, by name, what is missing to attach.
#include <cstdio>
#include <string>

#include "api/session.h"
#include "common/errors.h"

int main() {
  try {
    auto session = symmesh::Session::attach_from_environment();
    std::printf("attached as rank %d\n", session->place().rank);
  } catch (const symmesh::InvalidArgument& e) {
    std::printf("not attached: %s\n", e.what());
    return std::string(e.what()).find("SYMMESH_") == std::string::npos;
  }
  return 0;
}
