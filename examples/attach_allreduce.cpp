// Attached to its PE by `symmesh launch`, each process fills a tensor on the symmetric heap
// with its rank, all-reduces it in place through the daemon, and checks every element:
//   symmesh launch -- symmesh_example_allreduce [ELEMENTS]
// Exits 0 when the sum is right on this PE, 1 when it is not, 2 when a call failed.
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "api/session.h"

int main(int argc, char** argv) {
  try {
    const size_t count = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1 << 20;
    auto session = symmesh::Session::attach_from_environment();
    const auto& me = session->place();
    auto* x = static_cast<float*>(session->malloc(count * sizeof(float)));
    for (size_t i = 0; i < count; ++i) x[i] = float(me.rank + 1);
    session->all_reduce(x, count, symmesh::wire::DATA_TYPE_F32);
    const float expected = float(me.world_size * (me.world_size + 1) / 2);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += x[i] != expected;
    session->free(x);
    session->barrier();
    std::printf("rank %d of %d: all_reduce of %zu floats %s\n", me.rank, me.world_size, count,
                wrong ? "WRONG" : "ok");
    return wrong ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
