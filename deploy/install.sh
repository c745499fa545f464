#!/usr/bin/env bash
# Installs symmesh from a build directory: the binaries, the systemd unit (its paths set to the
# prefix), the example configuration, the deployment files and the README.
#   deploy/install.sh [--prefix DIR] [--build DIR]     (defaults: /usr/local, build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=/usr/local
build=$root/build
while [[ $# -gt 0 ]]; do
  case "$1" in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --build) build=${2:?--build needs a directory}; shift 2 ;;
    *) echo "install.sh: unknown argument '$1' (allowed: --prefix DIR, --build DIR)" >&2; exit 2 ;;
  esac
done
[[ -x "$build/bin/symmeshd" ]] || { echo "install.sh: no symmeshd in $build/bin: build first" >&2; exit 2; }
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
cmake --install "$build" --prefix "$prefix"
unit="$prefix/lib/systemd/system/symmeshd.service"
sed -i "s|/usr/local/bin/|$prefix/bin/|" "$unit"
echo "install.sh: installed into $prefix (unit: $unit)"
