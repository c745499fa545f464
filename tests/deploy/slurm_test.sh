#!/usr/bin/env bash
# deploy/slurm/symmesh.sbatch under a stand-in Slurm: `srun` starts its tasks on this host with
# SLURM_NODEID set (and stops them when stopped, as srun does), `scontrol show hostnames`
# names 127.0.0.1. Two "nodes" on loopback run a verified job end to end, then a program under
# symmesh launch on both; afterwards none of the daemons is left.  Usage: tests/deploy/slurm_test.sh BIN_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:?usage: slurm_test.sh BIN_DIR}
# Under the build directory, not /tmp: the stand-ins must be executable (/tmp may be noexec).
fake=$(mktemp -d "$bin/slurm-test.XXXXXX")
trap 'rm -rf "$fake"' EXIT

cat >"$fake/scontrol" <<'FAKE'
#!/usr/bin/env bash
[[ "$1 $2" == "show hostnames" ]] || exit 2
# An address, not "localhost": a sandbox may have no /etc/hosts entry for it.
for ((i = 0; i < SLURM_JOB_NUM_NODES; i++)); do echo 127.0.0.1; done
FAKE
cat >"$fake/srun" <<'FAKE'
#!/usr/bin/env bash
# Only what symmesh.sbatch uses: --ntasks=N and the command; the other options are accepted.
n=1
while [[ "$1" == --* ]]; do
  [[ "$1" == --ntasks=* ]] && n=${1#--ntasks=}
  shift
done
pids=()
for ((i = 0; i < n; i++)); do SLURM_NODEID=$i SLURM_PROCID=$i "$@" & pids+=($!); done
trap 'kill "${pids[@]}" 2>/dev/null; wait; exit 143' TERM
wait
FAKE
chmod +x "$fake/scontrol" "$fake/srun"

# Below the ephemeral range, where the cluster tests running beside this one pick theirs too:
# three ports (two control, one bootstrap) that nothing listens on yet.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=""
for ((attempt = 0; attempt < 50; attempt++)); do
  candidate=$((20000 + RANDOM % 12000))
  listening $candidate || listening $((candidate + 1)) || listening $((candidate + 2)) ||
    { port=$candidate; break; }
done
[[ -n "$port" ]] || { echo "slurm_test: 50 port triples in 20000-32000 all had a listener" >&2; exit 1; }
# sbatch JOB_ID ARGS...: the script on two "nodes" of 2 PEs, its output; then checks that none
# of the daemons outlives it (a bounded wait).
sbatch() {
  local job=$1
  shift
  PATH="$fake:$PATH" SLURM_JOB_ID=$job SLURM_JOB_NUM_NODES=2 SLURM_JOB_NODELIST="fake[1-2]" \
    SYMMESH_BIN="$bin" SYMMESH_WORKDIR="$fake" SYMMESH_LISTEN=127.0.0.1 SYMMESH_PORT=$port \
    SYMMESH_HEAP_SIZE=64MiB SYMMESH_TRANSPORT=tcp SYMMESH_RANKS_PER_NODE=2 \
    "$root/deploy/slurm/symmesh.sbatch" "$@"
}
daemons_gone() {
  for ((i = 0; i < 100; i++)); do
    pgrep -f -- "--secret-file $fake/symmesh-$1/secret" >/dev/null || return 0
    sleep 0.1
  done
  echo "slurm_test: daemons still running after the script ended" >&2
  exit 1
}

out=$(sbatch $$ submit collective --op allreduce --bytes 64KiB --verify --json)
echo "$out"
grep -q '"status":"ok"' <<<"$out" || { echo "slurm_test: the job did not succeed" >&2; exit 1; }
grep -q '"verified":true' <<<"$out" || { echo "slurm_test: the job was not verified" >&2; exit 1; }
grep -q '"pes":4' <<<"$out" || { echo "slurm_test: expected 2 nodes x 2 ranks" >&2; exit 1; }
daemons_gone $$

# A program under symmesh launch on every node: one process per PE, attached.
out=$(sbatch $$-launch launch -- "$bin/symmesh_example_allreduce" 4096 2>&1)
echo "$out"
for rank in 0 1 2 3; do
  grep -q "^\[rank $rank\] rank $rank of 4: all_reduce of 4096 floats ok" <<<"$out" ||
    { echo "slurm_test: rank $rank of the launched program did not report" >&2; exit 1; }
done
daemons_gone $$-launch
