#!/usr/bin/env bash
# One table of how symmesh holds up: the fault drills (tests/faults, and the verbs drills of the
# soft-RoCE suite when it ran first), the soak (bench/soak.sh: mixed jobs under client kills,
# cancels and node kills), the bad inputs (the BadInput and port tests, the fuzz targets'
# executions when tests/fuzz/run.sh ran on FUZZ_BUILD before), the connections opened and
# dropped. Exits non-zero when anything that must be 0 is not, a bad input was not
# refused, or the soak failed (a wrong result, a hung job, a node kill not survived). The
# drills are gated by ctest, which runs them first; a drill that fails here again is named
# with its assertion, counted in the table, and left to ctest to gate.
# Usage: tests/reliability-report.sh BUILD_DIR [SOAK_SECONDS (default 120)] [FUZZ_BUILD]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: tests/reliability-report.sh BUILD_DIR [SOAK_SECONDS] [FUZZ_BUILD]}
soak_seconds=${2:-120}
fuzz_build=${3:-build-asan}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$build/bin/symmesh_fault_tests" --gtest_output="json:$work/faults.json" >"$work/faults.log" 2>&1 || true
"$build/bin/symmesh_cluster_tests" --gtest_filter='BadInput.*:ControlPort.*:DataPort.*' \
  --gtest_output="json:$work/bad.json" >"$work/bad.log" 2>&1 || true
# Floods that must not slow what serves: the status endpoint and the attach socket under held
# connections.
"$build/bin/symmesh_cluster_tests" --gtest_filter='StatusHttp.ASourcePast*:StatusHttp.HealthAnswers*' \
  --gtest_output="json:$work/load.json" >"$work/load.log" 2>&1 || true
"$build/bin/symmesh_unit_tests" --gtest_filter='AttachUnderLoad.*' \
  --gtest_output="json:$work/attach_load.json" >"$work/attach_load.log" 2>&1 || true
python3 bench/soak.py --bin "$build/bin" --duration "$soak_seconds" --summary "$work/soak.json" \
  >"$work/soak.log" 2>&1 || true
cat "$work/soak.log"
grep -E -A4 'Failure$' "$work/faults.log" "$work/bad.log" "$work/load.log" \
  "$work/attach_load.log" || true
fuzz_runs=0
for log in "$fuzz_build"/fuzz-artifacts/*.log; do
  [[ -e "$log" ]] || continue
  runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -1 | grep -o '[0-9]*' || echo 0)
  fuzz_runs=$((fuzz_runs + runs))
done

# The verbs drills ran in the soft-RoCE suite (tests/softroce/run.sh), before this script.
python3 - "$work" "$fuzz_runs" "$build/softroce/results/softroce.json" <<'PY'
import json, sys
work, fuzz_runs, softroce_json = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def suite(name):
    try:
        report = json.load(open(f"{work}/{name}.json"))
    except (OSError, ValueError):
        return 0, 1
    tests = report.get("tests", 0)
    return tests - report.get("failures", 0) - report.get("errors", 0), tests
try:
    soak = json.load(open(f"{work}/soak.json"))
except (OSError, ValueError):
    soak = {}
drills_ok, drills = suite("faults")
bad_ok, bad = suite("bad")
load_ok, load = suite("load")
attach_ok, attach = suite("attach_load")
load_ok, load = load_ok + attach_ok, load + attach
def recorded(name, key, report="load"):
    # A figure a test recorded with RecordProperty; None when the test did not get that far.
    try:
        for group in json.load(open(f"{work}/{report}.json"))["testsuites"]:
            for test in group["testsuite"]:
                if test["name"] == name and key in test:
                    return float(test[key])
    except (OSError, ValueError, KeyError):
        pass
    return None
health_p99_us = recorded("HealthAnswersAtOnceUnderAThousandIdleAndAHundredTricklingConnections",
                         "health_p99_us")
health_in_time = health_p99_us is not None and health_p99_us <= 50_000
attach_us = recorded("AHundredStalledConnectionsDoNotHoldUpAnAttach", "attach_us_under_100_stalled",
                     "attach_load")
attach_in_time = attach_us is not None and attach_us <= 1_000_000
rejoin_ms = recorded("ARestartedNodeRejoinsWithin5SecondsWhile200IdleConnectionsHoldTheBootstrapPort",
                     "rejoin_ms_under_200_idle", "faults")
rejoin_in_time = rejoin_ms is not None and rejoin_ms <= 5000
figures_ok = health_in_time and attach_in_time and rejoin_in_time
def verbs_drills(prefix):
    # (ran, passed) of the soft-RoCE suite's VerbsFaults tests named with `prefix`; None when
    # the suite did not run here (skipped, or a machine without the guest).
    try:
        groups = json.load(open(softroce_json))["testsuites"]
    except (OSError, ValueError, KeyError):
        return None
    ran = passed = 0
    for group in groups:
        for test in group["testsuite"]:
            if group["name"] != "VerbsFaults" or not test["name"].startswith(prefix):
                continue
            if test.get("result") == "SKIPPED":
                continue
            ran += 1
            passed += 0 if test.get("failures") else 1
    return ran, passed
verbs_kill = verbs_drills("AKilledMember")
verbs_link = verbs_drills("ALinkThatDrops")
faults = drills + soak.get("faults", 0) + soak.get("client_kills", 0)
survived = drills_ok + soak.get("survived", 0) + soak.get("client_kills", 0)
for result in (verbs_kill, verbs_link):
    if result:
        faults, survived = faults + result[0], survived + result[1]
def ran_passed(result):
    if result is None or result[0] == 0:
        return "not run (the soft-RoCE suite did not run the drill)"
    return f"{result[0]} / {result[1]}"
rows = [
    ("faults injected / survived (drills, verbs drills, node kills, client kills)",
     f"{faults} / {survived}"),
    ("verbs: a node killed mid-job / the next job verified over verbs (soft-RoCE)",
     ran_passed(verbs_kill)),
    ("verbs: the link dropped mid-job / failed by name, re-formed over tcp (soft-RoCE guest)",
     ran_passed(verbs_link)),
    ("bad inputs tried / refused (tests; fuzz executions refused or harmless)",
     f"{bad + fuzz_runs} / {bad_ok + fuzz_runs}"),
    ("connections opened / leaked", f"{soak.get('opened', 0)} / {soak.get('leaked', 0)}"),
    ("jobs verified / wrong / hung", f"{soak.get('verified', 0)} / {soak.get('wrong', 0)} / "
                                     f"{soak.get('hung', 0)}"),
    ("jobs failed with a named error / another", f"{soak.get('failed_named', 0)} / "
                                                 f"{soak.get('failed_unnamed', 0)}"),
    ("floods held / served through (status endpoint, attach socket)", f"{load} / {load_ok}"),
    ("/health p99 under 1000 idle + 100 trickling connections (at most 50 ms)",
     "not measured" if health_p99_us is None else f"{health_p99_us / 1000:.2f} ms"),
    ("an attach with 100 stalled attach connections held (at most 1 s)",
     "not measured" if attach_us is None else f"{attach_us / 1000:.2f} ms"),
    ("a restarted node's rejoin with 200 idle bootstrap connections held (at most 5 s)",
     "not measured" if rejoin_ms is None else f"{rejoin_ms:.0f} ms"),
]
print("symmesh reliability report")
print("| what | count |")
print("|---|---|")
for label, value in rows:
    print(f"| {label} | {value} |")
ok = bad_ok == bad and soak.get("passed", False) and load_ok == load and figures_ok
failed = (faults - survived + bad - bad_ok + load - load_ok + (0 if soak.get('passed') else 1) +
          (0 if figures_ok else 1))
print(f"reliability: {survived + bad_ok + load_ok} passed, {failed} failed")
if drills_ok < drills:
    print(f"reliability: {drills - drills_ok} drill(s) failed on this rerun (named above); "
          "ctest gates the drills")
sys.exit(0 if ok else 1)
PY
