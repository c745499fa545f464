#!/usr/bin/env bash
# Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/) from readable
# text: protobuf messages through `protoc --encode`, each framed with its 4-byte length.
# Run it again after a wire message changes; the files it writes are committed.
set -euo pipefail
cd "$(dirname "$0")"
proto=../../wire
out=corpus
rm -rf "$out"
mkdir -p "$out"/{frame,handshake,control_request,npy,config,units,session_request}

encode() {  # MESSAGE TEXT -> protobuf bytes on stdout
  protoc --proto_path="$proto" --encode="symmesh.wire.$1" "$proto"/*.proto <<<"$2"
}
framed() {  # MESSAGE TEXT -> length-prefixed bytes on stdout (little-endian length)
  local body
  body=$(mktemp)
  encode "$1" "$2" >"$body"
  python3 -c "import sys,struct; sys.stdout.buffer.write(struct.pack('<I', int(sys.argv[1])))" \
    "$(stat -c %s "$body")"
  cat "$body"
  rm -f "$body"
}

framed DataHeader 'kind: PUT offset: 4096 length: 64 src_pe: 1' >"$out/frame/put"
{ framed DataHeader 'kind: PUT offset: 0 length: 8 has_signal: true signal_offset: 64 signal_value: 1'
  framed DataHeader 'kind: GET_REQUEST offset: 128 length: 16 token: 7'; } >"$out/frame/two"
framed DataHeader 'kind: PUT offset: 18446744073709551615 length: 2' >"$out/frame/wrap"

nonce='nonce: "0123456789abcdef0123456789abcdef"'
{ framed AuthHello "protocol_version: 6 role: ROLE_CONTROL $nonce"
  framed AuthProof 'mac: "0123456789abcdef0123456789abcdef"'
  framed AuthHello "protocol_version: 6 role: ROLE_CONTROL node_rank: 0 incarnation: 1 $nonce"
  framed AuthResult 'ok: true mac: "0123456789abcdef0123456789abcdef"'
  framed NodeHello 'protocol_version: 6 node_rank: 1 nodes: 4 ranks_per_node: 2 heap_size: 1048576 tcp_connections: 2 transport { kind: "verbs" absent: "no RDMA device" } transport { kind: "tcp" address: "\n\t127.0.0.1\x10\xd0\x0f" }'
} >"$out/handshake/full"
framed AuthHello "protocol_version: 5 $nonce" >"$out/handshake/old-version"

encode ClientRequest 'status {}' >"$out/control_request/status"
encode ClientRequest 'submit { collective { op: COLLECTIVE_OP_ALLREDUCE bytes: 4096 dtype: DATA_TYPE_F32 algo: COLLECTIVE_ALGO_RING iters: 2 verify: true } }' >"$out/control_request/collective"
encode ClientRequest 'submit { matmul { op: MATMUL_OP_GEMM_ALLREDUCE m: 64 n: 64 k: 1048576 dtype: DATA_TYPE_BF16 iters: 5 output: "../../etc" } }' >"$out/control_request/matmul"
encode ClientRequest 'submit { moe { op: MOE_OP_COMBINE tokens: 16 hidden: 8 topk: 2 experts: 4 iters: 1 routing: "/tmp" } } detach: true' >"$out/control_request/moe"
encode ClientRequest 'submit { barrier { algo: BARRIER_ALGO_KARY k: 4 iters: 10 } }' >"$out/control_request/barrier"
# A number the enum does not name (a newer peer's, or garbage).
encode ClientRequest 'submit { collective { op: 9 bytes: 64 iters: 1 } }' >"$out/control_request/unknown-enum"

python3 - "$out/npy" <<'PY'
import struct, sys
def npy(descr, shape, payload):
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d, %d), }" % (descr, *shape)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + payload
open(sys.argv[1] + "/f32", "wb").write(npy("<f4", (2, 3), struct.pack("<6f", *range(6))))
open(sys.argv[1] + "/i8", "wb").write(npy("<i8", (1, 2), struct.pack("<2q", -1, 5)))
open(sys.argv[1] + "/bf16", "wb").write(npy("<u2", (2, 2), struct.pack("<4H", 0x3f80, 0, 1, 2)))
PY

cat >"$out/config/node.toml" <<'TOML'
node-rank = 1
nodes = 2
ranks-per-node = 2
bootstrap = "10.0.0.1:7399"
listen = "10.0.0.2"
heap-size = "1GiB"
secret-file = "/etc/symmesh/secret"
heartbeat = "500ms"
job-memory = "2GiB"
TOML
printf 'nodes = "two"\n[table]\nx = 1\n' >"$out/config/bad.toml"

for text in 1GiB 64MiB 512 1.5KiB 60s 10ms 2m 0 18446744073709551615 -1 1e9; do
  printf '%s' "$text" >"$out/units/$text"
done

# Session requests (attach::Request in api/request_ring.h, little-endian, no padding): a count
# byte, the requests, then the pattern the staging areas and heaps are filled with.
python3 - "$out/session_request" <<'PY'
import struct, sys
HEAP = 9961472  # the first byte a call may name (runtime/layout.h kReservedBytes)
F32, BF16, SUM = 1, 2, 1
ROOM, SPILL = 1 << 34, 1 << 20  # a staged call's inputs from 0, its outputs after them
def req(op, dtype=0, reduce=0, inp=0, outp=0, src=0, dst=0, dst_bytes=0, count=0, args=(),
        stage_at=0, stage_room=ROOM, spill_at=SPILL):
    a = list(args) + [0] * (4 - len(args))
    return struct.pack("<IIIHHQQQQ4QQQQ", op, dtype, reduce, inp, outp, src, dst, dst_bytes, count,
                       *a, stage_at, stage_room, spill_at)
def seed(name, requests, pattern=b"", each_its_own=False):  # each: both halves, one a process
    first = 0x80 | (len(requests) // 2 - 1) if each_its_own else len(requests) - 1
    open(sys.argv[1] + "/" + name, "wb").write(bytes([first]) + b"".join(requests) + pattern)
experts = struct.pack("<8i", 0, 1, 2, 3, 1, 2, 3, 0)
seed("barrier", [req(2), req(1)])
seed("all-reduce", [req(3, count=4096), req(5, F32, SUM, src=HEAP, dst=HEAP, count=16),
                    req(6, F32, SUM, src=HEAP, dst=HEAP + 1024, count=16), req(4, dst=HEAP)])
seed("dispatch-combine", [req(10, count=65536), req(11, F32, count=2, args=(8, 2, 4)),
                          req(12, F32, count=2, args=(1, 0, 8))], experts)
# Outputs past a room too small for them (spill_at), and a spill_at over the inputs (refused).
seed("dispatch-spill", [req(10, count=65536),
                        req(11, F32, count=2, args=(8, 2, 4), stage_at=4096, stage_room=256,
                            spill_at=8192)], experts)
seed("spill-over-inputs", [req(10, count=65536),
                           req(11, F32, count=2, args=(8, 2, 4), stage_room=0, spill_at=64)],
     experts)
seed("dispatch-heap", [req(10, count=65536),
                       req(11, F32, inp=1, outp=1, src=HEAP, dst=HEAP + 4096, dst_bytes=512,
                           count=2, args=(8, 2, 4))], experts)
seed("low-latency", [req(10, count=65536), req(17, BF16, count=2, args=(8, 2, 4, 16)),
                     req(18, BF16, count=4, args=(1,))], experts)
# The daemon's own low-latency buffer (the heap's first region) is not the process's to free.
seed("free-the-buffer", [req(10, count=65536), req(17, BF16, count=2, args=(8, 2, 4, 16)),
                         req(4, dst=HEAP)], experts)
seed("fused", [req(10, count=65536), req(14, F32, args=(8, 8, 8, 1)),
               req(16, BF16, args=(4, 8, 8, 2))])
seed("release-detach", [req(13, args=(7,)), req(9), req(1)])
seed("disagree", [req(3, count=4096), req(5, F32, SUM, src=HEAP, dst=HEAP, count=16),
                  req(3, count=4096), req(5, F32, SUM, src=HEAP, dst=HEAP, count=32)],
     each_its_own=True)
seed("left-waiting", [req(2), req(2), req(1), req(9)], each_its_own=True)
# One-sided: a put_signal to the other PE, a get back that sets its done word, one at a
# misaligned word, then a broadcast from PE 1.
seed("one-sided", [req(3, count=8192), req(20, src=HEAP, dst=HEAP + 4096, count=256,
                                            args=(1, HEAP + 8000, 7)),
                   req(19, src=HEAP + 4096, dst=HEAP + 2048, count=256, args=(1, HEAP + 8008, 9)),
                   req(20, src=HEAP, dst=HEAP, count=8, args=(1, HEAP + 3, 1))])
seed("broadcast", [req(3, count=8192), req(21, src=HEAP, dst=HEAP + 4096, count=4096, args=(1,)),
                   req(21, src=HEAP, dst=HEAP + 100, count=4096, args=(0,))])
PY
