#!/usr/bin/env bash
# deploy/install.sh into a fresh prefix: the binaries run, the unit starts the installed daemon
# with the installed config path, the example configuration is one symmeshd accepts (it gets
# as far as reading the secret file the example names), and programs outside the tree build on
# the installed libraries with find_package(symmesh) (symmesh::runtime, symmesh::symmesh) and
# with pkg-config (libsymmesh), and run.
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: install_test.sh BUILD_DIR}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

"$root/deploy/install.sh" --prefix "$prefix" --build "$build" >/dev/null
# Whole outputs first: `| grep -q` may exit early and fail the writer with SIGPIPE.
daemon_help=$("$prefix/bin/symmeshd" --help)
[[ "$daemon_help" == *--status-addr* ]] || fail "installed symmeshd --help"
cli_help=$("$prefix/bin/symmesh" --help)
[[ "$cli_help" == *jobs* ]] || fail "installed symmesh --help"
unit="$prefix/lib/systemd/system/symmeshd.service"
grep -q "^ExecStart=$prefix/bin/symmeshd --config /etc/symmesh/symmeshd.toml$" "$unit" ||
  fail "the unit does not start $prefix/bin/symmeshd"
for key in LimitMEMLOCK=infinity NoNewPrivileges=yes User=symmesh; do
  grep -q "^$key$" "$unit" || fail "the unit lacks $key"
done
for file in share/symmesh/examples/symmeshd.toml share/symmesh/slurm/symmesh.sbatch \
  share/symmesh/k8s/statefulset.yaml share/doc/symmesh/README.md; do
  [[ -f "$prefix/$file" ]] || fail "$file was not installed"
done
set +e
out=$("$prefix/bin/symmeshd" --config "$prefix/share/symmesh/examples/symmeshd.toml" 2>&1)
set -e
grep -q "config file" <<<"$out" && fail "the example configuration is refused: $out"
grep -q "/etc/symmesh/secret" <<<"$out" || fail "expected a complaint about the secret file: $out"
[[ -f "$prefix/lib/cmake/symmesh/symmeshConfig.cmake" ]] || fail "no CMake package was installed"
consumer_build="$prefix/consumer-build"
cmake -S "$root/tests/deploy/consumer" -B "$consumer_build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null ||
  fail "find_package(symmesh) against $prefix failed"
cmake --build "$consumer_build" >/dev/null || fail "the consumer did not build on the installed libraries"
consumer_out=$("$consumer_build/consumer") || fail "the consumer failed: $consumer_out"
[[ "$consumer_out" == *"every word"* ]] || fail "the consumer said: $consumer_out"
# libsymmesh, through symmesh::symmesh and through pkg-config: outside symmesh launch, a
# program is told what is missing.
attach_out=$(env -u SYMMESH_LOCAL_RANK -u SYMMESH_ATTACH_SOCKET "$consumer_build/attach_consumer") ||
  fail "the symmesh::symmesh consumer said: $attach_out"
[[ "$attach_out" == *"SYMMESH_LOCAL_RANK is not set"* ]] || fail "the attach consumer said: $attach_out"
pc_program="$prefix/attach-pkg-config"
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs symmesh) ||
  fail "pkg-config does not know symmesh in $prefix/lib/pkgconfig"
# shellcheck disable=SC2086  # the flags are words
c++ "$root/tests/deploy/consumer/attach.cpp" -o "$pc_program" $flags ||
  fail "a program did not build with pkg-config's flags: $flags"
pc_out=$(env -u SYMMESH_LOCAL_RANK -u SYMMESH_ATTACH_SOCKET "$pc_program") ||
  fail "the pkg-config consumer said: $pc_out"
# The Python module, from the installed tree.
py_out=$(PYTHONPATH="$prefix/lib/symmesh/python" /usr/bin/python3 -c \
  'import symmesh; print(symmesh.Session.dispatch.__doc__.split(":")[0])' 2>&1) ||
  fail "the installed Python module does not import: $py_out"
echo "install_test: installed and checked in $prefix"
