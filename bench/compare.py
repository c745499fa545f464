#!/usr/bin/python3
"""Compares two bench/all.sh runs figure by figure.

Usage: bench/compare.py OLD.json NEW.json [--threshold 0.05]

Prints one row per figure both runs have: old, new, new/old, and the figure's ratios to its
same-run baselines in the new run. A symmesh figure that got worse by more than the threshold
(slower for a time, lower for a bandwidth) is flagged REGRESSION; the exit status is 1 when any
is. A peer's figure (Gloo, OpenMPI, iperf3) is never flagged: its drift is the machine's.
Figures only one run has are listed after the table.
"""
import argparse
import json
import sys


def load(path):
    with open(path) as f:
        run = json.load(f)
    if "figures" not in run:
        sys.exit(f"{path}: not a bench/all.sh result (no 'figures')")
    return run


def worse_by(old, new, better):
    """How much worse new is than old, as a fraction (negative: better)."""
    if old <= 0 or new <= 0:
        return 0.0
    return new / old - 1 if better == "lower" else old / new - 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--threshold", type=float, default=0.05,
                        help="flag figures worse by more than this fraction (default 0.05)")
    args = parser.parse_args()
    old, new = load(args.old), load(args.new)
    print(f"old: {old['commit']} {old['date']}   new: {new['commit']} {new['date']}")
    rows, regressions = [], 0
    for name in sorted(set(old["figures"]) & set(new["figures"])):
        o, n = old["figures"][name], new["figures"][name]
        worse = worse_by(o["value"], n["value"], n["better"])
        if n.get("peer"):
            flag = "peer"  # the machine's drift, not ours
        elif worse > args.threshold:
            flag = "REGRESSION"
            regressions += 1
        else:
            flag = "better" if worse < -args.threshold else ""
        against = ", ".join(f"{r:.2f}x {b}" for b, r in sorted(n.get("ratios", {}).items()))
        rows.append((name, f"{o['value']:.4g}", f"{n['value']:.4g}", n["unit"],
                     f"{n['value'] / o['value']:.2f}" if o["value"] else "-", flag, against))
    header = ("figure", "old", "new", "unit", "new/old", "", "new vs same-run baselines")
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for row in [header, tuple("-" * w for w in widths)] + rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |")
    for label, names in (("only in old", set(old["figures"]) - set(new["figures"])),
                         ("only in new", set(new["figures"]) - set(old["figures"]))):
        if names:
            print(f"{label}: {', '.join(sorted(names))}")
    print(f"{regressions} regression(s) beyond {args.threshold:.0%}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
