#!/usr/bin/env bash
# The one test command: installs what it needs, builds, and runs the whole suite (ctest),
# torch's distributed test suite on the symmesh backend (tests/torch_suite), the soft-RoCE suite
# (tests/softroce/run.sh: verbs on a real or QEMU-guest rxe device), the fuzz targets, the
# reliability report, then the unit tests again under AddressSanitizer+UndefinedBehaviorSanitizer
# and ThreadSanitizer. It ends with the time each phase took.
# SYMMESH_SKIP_SANITIZERS=1 skips the sanitizer runs of the unit tests (for quick local runs);
# SYMMESH_SKIP_SOFTROCE=1 skips the soft-RoCE suite, and says so; SYMMESH_SKIP_FUZZ=1 skips
# the libFuzzer targets (tests/fuzz/run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
skip_sanitizers=${SYMMESH_SKIP_SANITIZERS:-0}
skip_fuzz=${SYMMESH_SKIP_FUZZ:-0}

# Each phase's wall time, printed at the end (and when a phase fails) so CI's time is visible.
phase_table=""
phase_name=""
phase_start=0
phase() {
  phase_name=$1
  phase_start=$SECONDS
  shift
  "$@"
  phase_table+=$(printf '%6ds  %s' $((SECONDS - phase_start)) "$phase_name")$'\n'
  phase_name=""
}
print_phases() {
  echo "tests/run.sh: time per phase"
  printf '%s' "$phase_table"
  if [[ -n $phase_name ]]; then
    printf '%6ds  %s (failed)\n' $((SECONDS - phase_start)) "$phase_name"
  fi
  printf '%6ds  total\n' "$SECONDS"
}
trap print_phases EXIT

build_main() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j "$jobs"
}
# One clang build serves the fuzz targets and the AddressSanitizer+UBSan unit tests (SYMMESH_FUZZ
# is ASan and UBSan with libFuzzer's coverage), so the libraries compile once for both. It is
# also the build without verbs (no rdma-core needed).
build_asan() {
  local targets=()
  [[ $skip_fuzz == 1 ]] || targets+=(symmesh_fuzzers)
  [[ $skip_sanitizers == 1 ]] || targets+=(symmesh_unit_tests)
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSYMMESH_FUZZ=ON -DSYMMESH_VERBS=OFF >/dev/null
  cmake --build build-asan -j "$jobs" --target "${targets[@]}"
}
# The ThreadSanitizer build: the unit tests and the soft-RoCE binary with the daemon it starts,
# in one build call so both cores stay busy to the end.
build_tsan() {
  cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSYMMESH_TSAN=ON >/dev/null
  cmake --build build-tsan -j "$jobs" --target symmesh_unit_tests symmesh_softroce_tests \
    symmeshd symmesh
}
unit_tests() {
  ctest --test-dir "$1" -L unit --output-on-failure -j "$jobs" --timeout 900
}

phase "install dependencies" deploy/install-deps.sh
phase "build" build_main
phase "ctest" ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600
# torch's own distributed test suite on the symmesh backend: every test gloo passes must pass.
phase "torch suite" tests/torch_suite/run.sh build
phase "soft-RoCE suite" tests/softroce/run.sh build

if [[ $skip_fuzz == 1 && $skip_sanitizers == 1 ]]; then
  echo "tests/run.sh: fuzzing and sanitizers skipped"
else
  phase "ASan+UBSan build (clang)" build_asan
fi
# libFuzzer targets: each on its seed corpus and 5 s more.
if [[ $skip_fuzz == 1 ]]; then
  echo "tests/run.sh: fuzzing skipped (SYMMESH_SKIP_FUZZ=1)"
else
  phase "fuzz targets" tests/fuzz/run.sh build-asan
fi
# Fault drills, bad inputs and a 2-minute soak (node kills, client kills, cancels), one table.
phase "reliability report" tests/reliability-report.sh build 120 build-asan

if [[ $skip_sanitizers == 1 ]]; then
  echo "tests/run.sh: sanitizer builds skipped (SYMMESH_SKIP_SANITIZERS=1)"
  exit 0
fi
phase "ASan+UBSan unit tests" unit_tests build-asan
# history_size=7 (the most): a suppression matches a frame of either access, so TSan must still
# hold the older access's stack. With the default history a ring's sendmsg in a long test was
# forgotten ("failed to restore the stack") and its known race reported.
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 history_size=7"
phase "TSan build" build_tsan
phase "TSan unit tests" unit_tests build-tsan
# The verbs transport's threads (the notifier, the progress drain, the PEs) under
# ThreadSanitizer, on the soft-RoCE device: the transport-level tests.
phase "TSan soft-RoCE" env SYMMESH_SOFTROCE_FILTER='Verbs.*:Drain/*:Shapes/Rma.*2x2' \
  tests/softroce/run.sh build-tsan
