#!/usr/bin/env bash
# deploy/install.sh into a fresh prefix: the binaries run, the unit starts the installed daemon
# with the installed config path, the example configuration is one symmeshd accepts (it gets
# as far as reading the secret file the example names), and a program outside the tree builds
# on the installed libraries with find_package(symmesh) and runs.
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
echo "install_test: installed and checked in $prefix"
