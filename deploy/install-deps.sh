#!/usr/bin/env bash
# The one place that lists and installs symmesh's Debian packages.
# Usage: deploy/install-deps.sh [--bench | --softroce]
#   (no flag)   what building and testing need
#   --bench     also the peers the benchmarks compare against (Gloo, OpenMPI, perftest, iperf3)
#   --softroce  also what tests/softroce needs: the rdma tools, the rxe provider, and QEMU
#               with busybox for the guest (its kernel package is fetched by the harness)
# Idempotent: when every package is present it returns without touching apt.
set -euo pipefail

build_packages=(
  build-essential cmake pkg-config
  protobuf-compiler libprotobuf-dev
  libasio-dev
  libgtest-dev
  libcli11-dev
  libspdlog-dev libfmt-dev
  nlohmann-json3-dev
  libtomlplusplus-dev
  libmicrohttpd-dev  # the status endpoint
  libcpp-httplib-dev  # the tests' HTTP client
  libssl-dev
  libibverbs-dev
  libdnnl-dev
  iproute2 procps
  python3 python3-yaml
  python3-dev pybind11-dev python3-numpy python3-torch  # the Python module (python/)
  chromium  # the dashboard test loads the page in headless Chromium
  clang-14 libfuzzer-14-dev libclang-rt-14-dev  # the fuzz targets (tests/fuzz)
)
bench_packages=(libgloo-dev libopenmpi-dev openmpi-bin perftest iperf3)
softroce_packages=(rdma-core ibverbs-providers ibverbs-utils perftest
  qemu-system-x86 busybox-static kmod cpio)

wanted=("${build_packages[@]}")
if [[ "${1:-}" == "--bench" ]]; then
  wanted+=("${bench_packages[@]}" "${softroce_packages[@]}")
elif [[ "${1:-}" == "--softroce" ]]; then
  wanted+=("${softroce_packages[@]}")
elif [[ $# -gt 0 ]]; then
  echo "install-deps.sh: unknown argument '$1' (allowed: --bench, --softroce)" >&2
  exit 2
fi

missing=()
for pkg in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

echo "install-deps.sh: installing ${missing[*]}"
sudo_cmd=()
[[ $(id -u) -eq 0 ]] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
