#include "daemon/jobs/data_paths.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "common/errors.h"
#include "daemon/jobs/job.h"

namespace symmesh {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

// True when `path` is `dir` or lies below it (both canonical).
bool inside(const fs::path& path, const fs::path& dir) {
  auto [d, p] = std::mismatch(dir.begin(), dir.end(), path.begin(), path.end());
  return d == dir.end();
}

}  // namespace

std::string default_data_dir() {
  if (const std::string state = env("STATE_DIRECTORY"); !state.empty()) {
    return (fs::path(state.substr(0, state.find(':'))) / "data").string();
  }
  if (geteuid() == 0) return "/var/lib/symmesh/data";
  std::string base = env("XDG_STATE_HOME");
  if (base.empty()) base = env("HOME").empty() ? "/tmp" : env("HOME") + "/.local/state";
  return (fs::path(base) / "symmesh" / "data").string();
}

std::string prepare_data_dir(const std::string& data_dir) {
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (!ec && !fs::is_directory(data_dir, ec)) ec = std::make_error_code(std::errc::not_a_directory);
  if (ec) {
    throw InvalidArgument("--data-dir '" + data_dir + "': " + ec.message() +
                          " (the directory that holds jobs' --inputs and --output)");
  }
  fs::permissions(data_dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  return fs::canonical(data_dir).string();
}

std::string confine_to_data_dir(const std::string& path, const std::string& data_dir,
                                const std::string& flag) {
  const fs::path dir(data_dir);
  // weakly_canonical follows every symlink of the part that exists, so a link that points
  // out of the directory resolves to where it points.
  std::error_code ec;
  const fs::path resolved = fs::weakly_canonical(dir / path, ec);
  if (ec || !inside(resolved, dir)) {
    throw InvalidArgument(flag + " '" + path + "' resolves outside this daemon's data directory " +
                          data_dir +
                          " (symmeshd --data-dir): name a path inside it, or relative to it");
  }
  return resolved.string();
}

wire::JobSpec confine_job_paths(wire::JobSpec spec, const std::string& data_dir) {
  for (const auto& [path, flag] : job_kind_of(spec).paths(spec)) {
    if (!path->empty()) *path = confine_to_data_dir(*path, data_dir, flag);
  }
  return spec;
}

}  // namespace symmesh
