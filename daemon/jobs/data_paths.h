// The files a job names (--inputs, --output, --routing DIR) are the daemon's, so they are
// confined to its data directory (symmeshd --data-dir): a relative path is taken from there,
// and whatever a path resolves to, symlinks followed, must lie inside it. A client can then
// neither read nor overwrite anything else the daemon's user may touch.
#pragma once

#include <string>

#include "wire/jobs.pb.h"

namespace symmesh {

// $STATE_DIRECTORY/data under systemd, /var/lib/symmesh/data for root, otherwise
// $XDG_STATE_HOME (or ~/.local/state)/symmesh/data.
std::string default_data_dir();

// Creates `data_dir` (mode 0700) if needed; returns its canonical path. Throws
// InvalidArgument naming it when it cannot be made or is not a directory.
std::string prepare_data_dir(const std::string& data_dir);

// `path` resolved inside `data_dir` (canonical); throws InvalidArgument naming `flag`, the
// path, and the directory it must stay in.
std::string confine_to_data_dir(const std::string& path, const std::string& data_dir,
                                const std::string& flag);

// `spec` with every path it names confined to `data_dir` (see above).
wire::JobSpec confine_job_paths(wire::JobSpec spec, const std::string& data_dir);

}  // namespace symmesh
