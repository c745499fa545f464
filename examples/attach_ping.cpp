// The round trip of an empty call through the request ring, as an attached process sees it:
//   symmesh launch -- symmesh_example_ping [CALLS]
// Each PE times CALLS empty calls after a warm-up and prints the median and p99 in µs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <vector>

#include "api/session.h"

int main(int argc, char** argv) {
  try {
    const int calls = argc > 1 ? std::atoi(argv[1]) : 10000;
    auto session = symmesh::Session::attach_from_environment();
    for (int i = 0; i < 1000; ++i) session->ping();
    std::vector<double> us(size_t(std::max(calls, 1)));
    for (double& t : us) {
      const auto start = std::chrono::steady_clock::now();
      session->ping();
      t = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
              .count();
    }
    std::sort(us.begin(), us.end());
    session->barrier();
    std::printf("rank %d: empty call round trip: median %.2f us, p99 %.2f us (%d calls)\n",
                session->place().rank, us[us.size() / 2], us[us.size() * 99 / 100], calls);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
