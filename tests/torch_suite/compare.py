"""compare.py GLOO SYMMESH ALL: the suite's outcomes on both backends (JSON lines from
suite.py). Fails, naming each, when a test that passed on gloo did not pass on symmesh (or did
not run); with ALL=1 every test must have run and any other change of outcome is listed too."""

import collections
import json
import sys


def outcomes(path):
    return {row["test"]: row for row in map(json.loads, open(path))}


def main():
    gloo, symmesh, run_all = outcomes(sys.argv[1]), outcomes(sys.argv[2]), sys.argv[3] == "1"
    counts = collections.Counter(row["outcome"] for row in symmesh.values())
    print("torch's distributed suite on symmesh: " +
          ", ".join(f"{counts[o]} {o}" for o in ("pass", "fail", "error", "skip") if counts[o]) +
          f" of {len(symmesh)} run; gloo passes {sum(r['outcome'] == 'pass' for r in gloo.values())}"
          f" of {len(gloo)}")
    lost = []
    for name, row in sorted(gloo.items()):
        got = symmesh.get(name)
        if row["outcome"] == "pass" and (got is None or got["outcome"] != "pass"):
            lost.append(f"  {name}: {got['outcome'] + ': ' + got['detail'] if got else 'not run'}")
        elif run_all and got is not None and got["outcome"] != row["outcome"]:
            print(f"  {name}: {row['outcome']} on gloo, {got['outcome']} on symmesh")
    if lost:
        print(f"{len(lost)} tests that pass on gloo do not pass on symmesh:\n" + "\n".join(lost))
        return 1
    print("every test that passes on gloo passes on symmesh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
