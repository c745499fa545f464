#!/usr/bin/env bash
# The soak (bench/soak.py): a local cluster under mixed jobs, client kills, cancels and node
# kills with restarts for --duration seconds (default 120), then one table; exits non-zero on
# a wrong result, a hung job, a fault the cluster did not survive or a leaked connection.
# Usage: bench/soak.sh [--duration S] [--clients N] [--nodes K] [--ranks R] [--fault-every S]
#        (a 30-minute run: bench/soak.sh --duration 1800)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ! -x build/bin/symmeshd || ! -x build/bin/symmesh ]]; then
  deploy/install-deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build build -j "$(nproc)" --target symmeshd symmesh >/dev/null
fi
exec python3 bench/soak.py --bin build/bin "$@"
