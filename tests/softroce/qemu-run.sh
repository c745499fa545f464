#!/usr/bin/env bash
# Runs a command as root inside a QEMU guest that boots Debian's kernel with rdma_rxe and
# sees the host's / read-only (so it runs the host-built binaries at their own paths).
# Pure emulation (TCG): nested KVM is broken on these machines (docs/OPERATIONS.md, "Soft-RoCE").
# Usage: qemu-run.sh IMAGE_DIR RESULTS_DIR -- COMMAND...
#   IMAGE_DIR from guest-image.sh; RESULTS_DIR is writable in the guest at the same path.
# Prints the command's output; exits with its exit code (or 125 when the guest itself failed).
set -euo pipefail
image=${1:?usage: qemu-run.sh IMAGE_DIR RESULTS_DIR -- COMMAND...}
results=${2:?usage: qemu-run.sh IMAGE_DIR RESULTS_DIR -- COMMAND...}
shift 2
[[ "${1:-}" == "--" ]] && shift
mkdir -p "$results"
results=$(cd "$results" && pwd)
rm -f "$results/exit-code" "$results/output.log" "$results/kernel.log"
{
  echo "cd $(printf '%q' "$PWD")"
  printf '%q ' "$@"
  echo
} >"$results/command.sh"

timeout_s=${SYMMESH_QEMU_TIMEOUT:-900}
set +e
timeout "$timeout_s" qemu-system-x86_64 \
  -accel tcg,thread=multi -cpu max -smp 2 -m 3072 -nographic -no-reboot \
  -kernel "$image/vmlinuz" -initrd "$image/initramfs.gz" \
  -append "console=ttyS0 quiet panic=-1 symmesh.results=$results" \
  -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
  -virtfs "local,path=$results,mount_tag=results,security_model=none,multidevs=remap" \
  -nic none >"$results/console.log" 2>&1
qemu_status=$?
set -e
[[ -f "$results/output.log" ]] && cat "$results/output.log"
if [[ ! -f "$results/exit-code" ]]; then
  echo "qemu-run.sh: the guest did not finish the command (qemu exit $qemu_status" \
    "after at most ${timeout_s}s); console tail:" >&2
  tail -n 40 "$results/console.log" >&2
  exit 125
fi
exit "$(cat "$results/exit-code")"
