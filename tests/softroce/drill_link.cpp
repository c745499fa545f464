#include "tests/softroce/drill_link.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "transport/wait.h"

namespace symmesh::testing {
namespace {

constexpr const char* kNetdev = "smdrill0";
const std::string kPort = std::string("/sys/class/infiniband/") + DrillLink::kDevice + "/ports/1";
// ::ffff:192.0.2.1 as the kernel prints a GID.
constexpr const char* kGid = "0000:0000:0000:0000:0000:ffff:c000:0201";

// Runs `command` through the shell; returns "" or the command that failed, with its status.
std::string run(const std::string& command) {
  const int status = std::system((command + " >/dev/null 2>&1").c_str());
  if (status == 0) return "";
  return "'" + command + "' exited with status " + std::to_string(status);
}

std::string first_line(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  return line;
}

bool port_ready() {
  if (first_line(kPort + "/state").find("ACTIVE") == std::string::npos) return false;
  std::error_code error;
  for (const auto& gid : std::filesystem::directory_iterator(kPort + "/gids", error)) {
    if (first_line(gid.path()) == kGid) return true;
  }
  return false;
}

}  // namespace

DrillLink::DrillLink() {
  const char* drill = std::getenv("SYMMESH_LINK_DRILL");
  if (!drill || std::string(drill) != "1") {
    skip_reason_ =
        "the link-drop drill changes network devices, so it runs only in the soft-RoCE suite's "
        "QEMU guest (SYMMESH_LINK_DRILL=1)";
    return;
  }
  run(std::string("ip link delete ") + kNetdev);  // a previous run's, if it was left
  made_ = true;
  for (const std::string& step :
       {std::string("ip link add ") + kNetdev + " type veth peer name smdrill1",
        std::string("ip addr add 192.0.2.1/24 dev ") + kNetdev,
        std::string("ip link set smdrill1 up"), std::string("ip link set ") + kNetdev + " up",
        std::string("rdma link add ") + kDevice + " type rxe netdev " + kNetdev}) {
    failed_ = run(step);
    if (!failed_.empty()) return;
  }
  // The GID table fills in from the address on the kernel's own time.
  const Deadline deadline = deadline_after(std::chrono::seconds(20));
  while (!port_ready()) {
    if (Clock::now() >= deadline) {
      failed_ = std::string(kDevice) + " port 1 was not ACTIVE with GID " + kGid + " within 20 s";
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

DrillLink::~DrillLink() {
  if (made_) run(std::string("ip link delete ") + kNetdev);
}

std::string DrillLink::set_down() {
  return run(std::string("ip link set ") + kNetdev + " down");
}

}  // namespace symmesh::testing
