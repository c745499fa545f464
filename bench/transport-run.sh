#!/usr/bin/env bash
# The measuring half of bench/transport.sh, run where the RDMA device is (host or guest).
# Usage: transport-run.sh BIN_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:?usage: transport-run.sh BIN_DIR}
runs=${RUNS:-3}
device_and_gid=$(tests/softroce/rxe-device.sh)
device=${device_and_gid% *}
gid_index=${device_and_gid#* }
ulimit -l unlimited 2>/dev/null || true

sizes=(4096 65536 1048576 16777216)
label() { case $1 in 4096) echo 4KiB ;; 65536) echo 64KiB ;; 1048576) echo 1MiB ;; *) echo 16MiB ;; esac; }
# About 4 MiB per timed iteration: a window of 64 small puts, fewer large ones.
window_of() { local w=$((4194304 / $1)); ((w > 64)) && w=64; ((w < 1)) && w=1; echo $w; }
iters_of() { if (($1 >= 1048576)); then echo 5; else echo 20; fi; }
median() { sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
json_field() { grep -o "\"$1\":[0-9.e+-]*" | cut -d: -f2; }

declare -A result
measure_symmesh() {  # name transport [symmeshd flags...]
  local name=$1 transport=$2 port=$((7900 + RANDOM % 500 * 2))
  shift 2
  eval "$(SYMMESH_BIN=$bin deploy/local-cluster.sh up --nodes 2 --ranks-per-node 1 \
    --transport "$transport" --base-port "$port" --heap-size 96MiB --ready-timeout 120 -- "$@")"
  for size in "${sizes[@]}"; do
    result[$name,bw,$size]=$(for _ in $(seq "$runs"); do
      "$bin/symmesh" submit transport --op put-bw --bytes "$size" --window "$(window_of "$size")" \
        --iters "$(iters_of "$size")" --json | json_field gbps
    done | median)
  done
  result[$name,lat]=$(for _ in $(seq "$runs"); do
    "$bin/symmesh" submit transport --op put-signal-lat --bytes 8 --iters 200 --json |
      json_field p50_us
  done | median)
  result[$name,sig]=$(for _ in $(seq "$runs"); do
    "$bin/symmesh" submit transport --op signal-lat --iters 200 --json | json_field p50_us
  done | median)
  deploy/local-cluster.sh down --dir "$SYMMESH_CLUSTER_DIR"
}

run_perftest() {  # tool args... -> the client's output
  local tool=$1 port=$((19000 + RANDOM % 1000))
  shift
  "$tool" -d "$device" -x "$gid_index" -p "$port" "$@" >/dev/null 2>&1 &
  local server=$!
  local out=""
  for _ in $(seq 50); do  # the server needs a moment to listen: retry, bounded
    if out=$("$tool" -d "$device" -x "$gid_index" -p "$port" "$@" 127.0.0.1 2>/dev/null); then
      break
    fi
    sleep 0.2
  done
  wait "$server" 2>/dev/null || true
  echo "$out"
}

measure_perftest() {
  for size in "${sizes[@]}"; do
    local n=$((67108864 / size))
    ((n > 1000)) && n=1000
    ((n < 5)) && n=5
    # The line starting with the size: #bytes #iterations BW-peak BW-average MsgRate (Gb/s).
    result[perftest,bw,$size]=$(for _ in $(seq "$runs"); do
      run_perftest ib_write_bw -s "$size" -n "$n" -F --report_gbits |
        awk -v s="$size" '$1 == s {print $4 / 8; exit}'
    done | median)
  done
  # #bytes #iterations t_min t_max t_typical ...: t_typical is the median one-way latency.
  result[perftest,lat]=$(for _ in $(seq "$runs"); do
    run_perftest ib_write_lat -s 8 -n 1000 -F | awk '$1 == 8 {print $5; exit}'
  done | median)
  # What the device takes per 8-byte write when writes follow each other (ib_write_bw's message
  # rate, Mpps, in its fifth column): a hop of two writes (put_signal: the data, then the signal)
  # takes about one write's latency plus this (an estimate: the two overlap a little).
  result[perftest,next]=$(for _ in $(seq "$runs"); do
    run_perftest ib_write_bw -s 8 -n 1000 -F | awk '$1 == 8 {if ($5 > 0) print 1 / $5; exit}'
  done | median)
  result[perftest,two]=$(awk -v a="${result[perftest,lat]}" -v b="${result[perftest,next]}" \
    'BEGIN {print a + b}')
}

measure_symmesh tcp tcp
measure_symmesh verbs verbs
measure_symmesh thread verbs --verbs-progress thread
measure_perftest

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
echo
echo "device $device (GID index $gid_index), $(uname -r), medians of $runs runs"
echo
echo "put bandwidth, GB/s (window of puts + quiet; perftest: ib_write_bw)"
printf "| %-6s | %9s | %9s | %13s | %9s | %10s | %9s |\n" size tcp verbs "verbs+thread" perftest \
  "verbs/perf" "verbs/tcp"
printf "|%s|\n" "--------|-----------|-----------|---------------|-----------|------------|-----------"
for size in "${sizes[@]}"; do
  printf "| %-6s | %9.4f | %9.4f | %13.4f | %9.4f | %10s | %9s |\n" "$(label "$size")" \
    "${result[tcp,bw,$size]}" "${result[verbs,bw,$size]}" "${result[thread,bw,$size]}" \
    "${result[perftest,bw,$size]}" \
    "$(ratio "${result[verbs,bw,$size]}" "${result[perftest,bw,$size]}")" \
    "$(ratio "${result[verbs,bw,$size]}" "${result[tcp,bw,$size]}")"
done
echo
echo "latency, one way, us (perftest: ib_write_lat t_typical, one 8-byte write per hop)"
echo "put_signal: 8 bytes of data, then the signal (two writes); signal: the 8-byte word alone"
printf "| %-10s | %9s | %9s | %13s | %9s | %10s | %9s |\n" op tcp verbs "verbs+thread" perftest \
  "verbs/perf" "verbs/tcp"
printf "|%s|\n" "------------|-----------|-----------|---------------|-----------|------------|-----------"
for op in lat sig; do
  printf "| %-10s | %9.1f | %9.1f | %13.1f | %9.1f | %10s | %9s |\n" \
    "$([[ $op == lat ]] && echo put_signal || echo signal)" "${result[tcp,$op]}" \
    "${result[verbs,$op]}" "${result[thread,$op]}" "${result[perftest,lat]}" \
    "$(ratio "${result[verbs,$op]}" "${result[perftest,lat]}")" \
    "$(ratio "${result[verbs,$op]}" "${result[tcp,$op]}")"
done
echo
printf "two writes per hop on this device: ib_write_lat %.1f us + %.1f us for the next write " \
  "${result[perftest,lat]}" "${result[perftest,next]}"
printf "(1 / ib_write_bw's 8-byte message rate) = %.1f us; put_signal over verbs / that: %s\n" \
  "${result[perftest,two]}" "$(ratio "${result[verbs,lat]}" "${result[perftest,two]}")"
