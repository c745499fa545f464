#!/usr/bin/env bash
# The one test command: installs what it needs, builds, and runs the whole suite (ctest),
# torch's distributed test suite on the symmesh backend (tests/torch_suite), the soft-RoCE suite
# (tests/softroce/run.sh: verbs on a real or QEMU-guest rxe device), the fuzz targets, then the
# unit tests again under AddressSanitizer+UndefinedBehaviorSanitizer and ThreadSanitizer.
# SYMMESH_SKIP_SANITIZERS=1 skips the sanitizer builds (for quick local runs);
# SYMMESH_SKIP_SOFTROCE=1 skips the soft-RoCE suite, and says so; SYMMESH_SKIP_FUZZ=1 skips
# the libFuzzer targets (tests/fuzz/run.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

deploy/install-deps.sh
jobs=$(nproc)

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs" --timeout 600
# torch's own distributed test suite on the symmesh backend: every test gloo passes must pass.
tests/torch_suite/run.sh build
tests/softroce/run.sh build

# libFuzzer targets (clang, AddressSanitizer + UBSan): each on its seed corpus and 5 s more.
if [[ "${SYMMESH_SKIP_FUZZ:-0}" == 1 ]]; then
  echo "tests/run.sh: fuzzing skipped (SYMMESH_SKIP_FUZZ=1)"
else
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSYMMESH_FUZZ=ON >/dev/null
  cmake --build build-fuzz -j "$jobs" --target symmesh_fuzzers
  tests/fuzz/run.sh build-fuzz
fi
# Fault drills, bad inputs and a 2-minute soak (node kills, client kills, cancels), one table.
tests/reliability-report.sh build 120

if [[ "${SYMMESH_SKIP_SANITIZERS:-0}" == 1 ]]; then
  echo "tests/run.sh: sanitizer builds skipped (SYMMESH_SKIP_SANITIZERS=1)"
  exit 0
fi
# history_size=7 (the most): a suppression matches a frame of either access, so TSan must still
# hold the older access's stack. With the default history a ring's sendmsg in a long test was
# forgotten ("failed to restore the stack") and its known race reported.
export TSAN_OPTIONS="suppressions=$PWD/tests/tsan.supp halt_on_error=1 history_size=7"
for sanitizer in ASAN TSAN; do
  dir="build-${sanitizer,,}"
  unit_only=ON
  verbs=OFF  # the ASan build is also the build without verbs (no rdma-core needed)
  if [[ $sanitizer == TSAN ]]; then
    unit_only=OFF  # the soft-RoCE binary below needs the daemon
    verbs=ON
  fi
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DSYMMESH_UNIT_TESTS_ONLY=$unit_only" \
    "-DSYMMESH_${sanitizer}=ON" "-DSYMMESH_VERBS=$verbs" >/dev/null
  cmake --build "$dir" -j "$jobs" --target symmesh_unit_tests
  ctest --test-dir "$dir" -L unit --output-on-failure -j "$jobs" --timeout 900
done
# The verbs transport's threads (the notifier, the progress drain, the PEs) under
# ThreadSanitizer, on the soft-RoCE device: the transport-level tests.
SYMMESH_SOFTROCE_FILTER='Verbs.*:Drain/*:Shapes/Rma.*2x2' tests/softroce/run.sh build-tsan
