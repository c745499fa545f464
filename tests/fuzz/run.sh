#!/usr/bin/env bash
# Runs every libFuzzer target of a SYMMESH_FUZZ build on its committed seed corpus, then for
# SYMMESH_FUZZ_SECONDS more (default 5) each; a crash, a sanitizer report, a leak or a time-out
# fails the run and leaves the input in BUILD/fuzz-artifacts/. New corpus entries go to
# BUILD/fuzz-corpus/, never into the repository.
# Usage: tests/fuzz/run.sh BUILD_DIR     (longer: SYMMESH_FUZZ_SECONDS=600 tests/fuzz/run.sh ...)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:?usage: tests/fuzz/run.sh BUILD_DIR}
seconds=${SYMMESH_FUZZ_SECONDS:-5}
passed=0
failed=0
mkdir -p "$build/fuzz-artifacts"
for seeds in tests/fuzz/corpus/*/; do
  name=$(basename "$seeds")
  binary="$build/bin/fuzz_$name"
  [[ -x "$binary" ]] || { echo "fuzz: $binary is missing (build target symmesh_fuzzers)" >&2; exit 2; }
  corpus="$build/fuzz-corpus/$name"
  mkdir -p "$corpus"
  log="$build/fuzz-artifacts/$name.log"
  if "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$build/fuzz-artifacts/$name-" "$corpus" "$seeds" >"$log" 2>&1; then
    runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -1 || true)
    echo "fuzz_$name: ok (${runs:-no summary}, ${seconds}s)"
    passed=$((passed + 1))
  else
    echo "fuzz_$name: FAILED; the input and report are under $build/fuzz-artifacts/:" >&2
    grep -E 'ERROR|SUMMARY|#[0-9]+ 0x' "$log" | head -30 >&2 || tail -30 "$log" >&2
    failed=$((failed + 1))
  fi
done
echo "fuzz: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
