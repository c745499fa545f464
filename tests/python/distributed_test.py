"""torch.distributed programs on the symmesh backend, as a program written for gloo uses it:
processes started by torch.multiprocessing.spawn (not symmesh launch), attached through
SYMMESH_DAEMON and SYMMESH_SECRET_FILE. Checks every collective against a reference computed
here, every dtype with every reduction torch takes for it (and a sparse sum), async work,
point-to-point messages
(tags, any source, batches, messages larger than the mailbox's arena), subgroups, the object
collectives, tensors on the symmetric heap, wrong calls raising ValueError naming what was wrong, a receive that times out
naming what it waited for, and a second init after destroy. Prints one line per rank and exits
non-zero on the first failure.

    distributed_test.py WORLD_SIZE
"""

import datetime
import os
import sys

import torch
import torch.distributed as dist
from spawned_checks import check, expect_error, report, spawn

import symmesh.distributed  # registers the backend; session() gives heap tensors

R = dist.ReduceOp
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTEGERS = [torch.int8, torch.uint8, torch.int32, torch.int64]
OPS = {  # what torch's gloo takes, by dtype family
    "float": [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG],
    "int": [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR],
    "bool": [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.BAND, R.BOR, R.BXOR],
}


def input_of(rank, dtype, n=33):
    """A rank's all_reduce input: small values whose sums and products stay exact."""
    if dtype == torch.bool:
        return (torch.arange(n) + rank) % 3 == 0
    values = (torch.arange(n) % 5 + rank + 1)
    if dtype == torch.int8:
        values = values - 3  # negatives too
    return values.to(dtype)


def reference(op, tensors):
    out = tensors[0].clone()
    pair = {R.SUM: torch.add, R.AVG: torch.add, R.PRODUCT: torch.mul, R.MIN: torch.minimum,
            R.MAX: torch.maximum, R.BAND: torch.bitwise_and, R.BOR: torch.bitwise_or,
            R.BXOR: torch.bitwise_xor}
    for t in tensors[1:]:
        out = pair[op](out, t)
    return out / len(tensors) if op == R.AVG else out


def reductions(rank, world):
    for dtype in FLOATS + INTEGERS + [torch.bool]:
        family = "bool" if dtype == torch.bool else ("float" if dtype in FLOATS else "int")
        for op in OPS[family]:
            t = input_of(rank, dtype)
            dist.all_reduce(t, op=op)
            want = reference(op, [input_of(r, dtype) for r in range(world)])
            check(f"all_reduce {op} {dtype}", torch.equal(t, want.to(dtype)), f"{t} vs {want}")
    c = torch.full((4,), complex(rank, 1), dtype=torch.complex64)
    dist.all_reduce(c)
    check("all_reduce complex64", bool((c == complex(sum(range(world)), world)).all()), c)
    m = torch.arange(12.0).reshape(3, 4).t() + rank  # not contiguous
    dist.all_reduce(m)
    want = sum(torch.arange(12.0).reshape(3, 4).t() + r for r in range(world))
    check("all_reduce of a non-contiguous tensor", torch.equal(m, want), m)
    sparse = torch.sparse_coo_tensor([[rank, world]], [1.0, float(rank)], (world + 1,))
    dist.all_reduce(sparse)
    want = torch.ones(world + 1)
    want[world] = sum(range(world))
    check("sparse all_reduce", torch.equal(sparse.to_dense(), want) and sparse.is_coalesced(),
          sparse)
    expect_error("BAND on float32", lambda: dist.all_reduce(torch.ones(2), op=R.BAND),
                 ValueError, "reduce op BAND on float32 tensors: allowed")


def rooted(rank, world):
    for root in range(world):
        b = torch.full((5,), float(rank))
        dist.broadcast(b, root)
        check(f"broadcast from {root}", bool((b == root).all()), b)
        t = torch.full((3,), float(rank + 1))
        dist.reduce(t, root, op=R.MAX)
        if rank == root:
            check(f"reduce to {root}", bool((t == world).all()), t)
        i = torch.tensor([rank + 2], dtype=torch.int64)
        dist.reduce(i, root, op=R.PRODUCT)
        if rank == root:
            want = 1
            for r in range(world):
                want *= r + 2
            check(f"reduce PRODUCT int64 to {root}", i.item() == want, i)
        out = [torch.zeros(2, dtype=torch.int32) for _ in range(world)] if rank == root else None
        dist.gather(torch.tensor([rank, rank * 10], dtype=torch.int32), out, dst=root)
        if rank == root:
            check(f"gather to {root}", [o.tolist() for o in out] ==
                  [[r, r * 10] for r in range(world)], out)
        parts = [torch.full((3,), r * 1.5) for r in range(world)] if rank == root else None
        got = torch.zeros(3)
        dist.scatter(got, parts, src=root)
        check(f"scatter from {root}", bool((got == rank * 1.5).all()), got)


def gathers(rank, world):
    out = [torch.zeros(3, dtype=torch.uint8) for _ in range(world)]
    dist.all_gather(out, torch.tensor([rank, 7, 255], dtype=torch.uint8))  # 3 bytes: padded
    check("all_gather uint8 x3", [o.tolist() for o in out] == [[r, 7, 255] for r in range(world)])
    flat = torch.zeros(world * 4, dtype=torch.bfloat16)
    dist.all_gather_into_tensor(flat, torch.full((4,), float(rank), dtype=torch.bfloat16))
    check("all_gather_into_tensor bf16", flat.tolist() == [float(r) for r in range(world)
                                                            for _ in range(4)], flat)
    parts = [torch.full((2,), float(rank * 10 + j)) for j in range(world)]
    mine = torch.zeros(2)
    dist.reduce_scatter(mine, parts)
    check("reduce_scatter", bool((mine == sum(r * 10 + rank for r in range(world))).all()), mine)
    big = torch.arange(world * 3, dtype=torch.int64) + rank
    part = torch.zeros(3, dtype=torch.int64)
    dist.reduce_scatter_tensor(part, big)
    want = sum(torch.arange(world * 3, dtype=torch.int64) + r for r in range(world))
    check("reduce_scatter_tensor int64", torch.equal(part, want[rank * 3:rank * 3 + 3]), part)


def all_to_alls(rank, world):
    src = torch.arange(world * 2, dtype=torch.float32) + 100 * rank
    dst = torch.empty(world * 2)
    dist.all_to_all_single(dst, src)
    check("all_to_all_single", dst.tolist() ==
          [100 * j + 2 * rank + k for j in range(world) for k in range(2)], dst)
    # Unequal: rank r sends j + 1 rows to rank j, of value 1000 * r + j.
    ins = [j + 1 for j in range(world)]
    outs = [rank + 1] * world
    src = torch.cat([torch.full((j + 1, 2), 1000.0 * rank + j) for j in range(world)])
    dst = torch.empty(sum(outs), 2)
    dist.all_to_all_single(dst, src, outs, ins)
    want = torch.cat([torch.full((rank + 1, 2), 1000.0 * j + rank) for j in range(world)])
    check("all_to_all_single with unequal splits", torch.equal(dst, want), dst)
    outputs = [torch.empty(j + 1, dtype=torch.int16) for j in range(world)]
    dist.all_to_all(outputs, [torch.full((rank + 1,), rank * 100 + j, dtype=torch.int16)
                              for j in range(world)])
    check("all_to_all of lists", [o.tolist() for o in outputs] ==
          [[j * 100 + rank] * (j + 1) for j in range(world)], outputs)


def asyncs(rank, world):
    t = torch.ones(1000)
    work = dist.all_reduce(t, async_op=True)
    check("async all_reduce wait", work.wait() is True)
    check("async all_reduce is_completed", work.is_completed())
    future = dist.all_reduce(torch.ones(4), async_op=True).get_future()
    check("get_future", bool((future.wait()[0] == world).all()), future.value())
    dist.barrier()


def point_to_point(rank, world):
    right, left = (rank + 1) % world, (rank - 1) % world
    for tag in (0, 7):
        got = torch.zeros(6, dtype=torch.float64)
        ops = [dist.irecv(got, left, tag=tag), dist.isend(torch.full((6,), rank + tag * 1.0,
                                                                     dtype=torch.float64),
                                                          right, tag=tag)]
        for op in ops:
            op.wait()
        check(f"ring isend/irecv tag {tag}", bool((got == left + tag).all()), got)
    # Tags sort messages from one source: the later tag's receive is posted first.
    if rank == 0:
        dist.send(torch.tensor([1]), 1, tag=1)
        dist.send(torch.tensor([2]), 1, tag=2)
    elif rank == 1:
        second, first = torch.zeros(1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64)
        w2 = dist.irecv(second, 0, tag=2)
        w1 = dist.irecv(first, 0, tag=1)
        w2.wait()
        w1.wait()
        check("receives matched by tag", (first.item(), second.item()) == (1, 2))
    # From any source: rank 0 hears from everyone else once.
    if rank == 0:
        seen = set()
        for _ in range(world - 1):
            t = torch.zeros(1, dtype=torch.int64)
            source = dist.recv(t)
            check("recv from any source names it", source == t.item(), (source, t))
            seen.add(source)
        check("every source heard", seen == set(range(1, world)), seen)
    else:
        dist.send(torch.tensor([rank]), 0)
    dist.barrier()  # what follows, of tag 0 too, is not for those receives
    # A batch, and messages larger than the arena (SYMMESH_P2P_ARENA_BYTES): chunks, and sends
    # that wait for the receiver to take what came before.
    n = 300_000
    out = torch.arange(n, dtype=torch.float32) + rank
    back = torch.zeros(n)
    reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, out, right),
                                   dist.P2POp(dist.irecv, back, left)])
    for req in reqs:
        req.wait()
    check("batch_isend_irecv of 1.2 MB", torch.equal(back, torch.arange(n, dtype=torch.float32)
                                                     + left))
    expect_error("a message of another size", lambda: _wrong_size(rank, world), ValueError,
                 "the receiving tensor has")
    lonely = torch.zeros(1)
    work = dist.irecv(lonely, left, tag=99)
    expect_error("a receive nobody sends to", lambda: work.wait(datetime.timedelta(seconds=0.3)),
                 TimeoutError, f"recv from rank {left} (tag 99)")
    dist.barrier()


def _wrong_size(rank, world):
    if rank == 0:
        dist.send(torch.zeros(3), 1, tag=5)
    if rank == 1:
        dist.recv(torch.zeros(4), 0, tag=5)
    raise ValueError("the receiving tensor has")  # the other ranks: nothing was wrong


def subgroups(rank, world):
    pair = dist.new_group([1, 2])
    if rank in (1, 2):
        x = torch.tensor([float(rank)])
        dist.all_reduce(x, group=pair)
        check("all_reduce in a subgroup", x.item() == 3.0, x)
        b = torch.tensor([rank])
        dist.broadcast(b, 2, group=pair)
        check("broadcast in a subgroup from global rank 2", b.item() == 2, b)
        out = [torch.zeros(1, dtype=torch.int64) for _ in range(2)]
        dist.all_gather(out, torch.tensor([rank * 3]), group=pair)
        check("all_gather in a subgroup", [o.item() for o in out] == [3, 6], out)
        i = torch.tensor([rank], dtype=torch.int32)
        dist.all_reduce(i, op=R.BXOR, group=pair)
        check("BXOR in a subgroup", i.item() == 3, i)
        dist.barrier(group=pair)
        if rank == 1:
            dist.send(torch.tensor([42]), 2, group=pair)
        else:
            t = torch.zeros(1, dtype=torch.int64)
            dist.recv(t, 1, group=pair)
            check("send/recv in a subgroup", t.item() == 42, t)
    # Pairs side by side (new_subgroups' layout; torch 1.13's new_subgroups wants CUDA): every
    # rank makes every group, and uses its own.
    pairs = [dist.new_group([p, p + 1]) for p in range(0, world - 1, 2)]
    if rank // 2 < len(pairs):
        s = torch.tensor([float(rank)])
        dist.all_reduce(s, group=pairs[rank // 2])
        base = rank // 2 * 2
        check("pairs of subgroups", s.item() == base + base + 1, s)


def objects(rank, world):
    got = [None] * world
    dist.all_gather_object(got, {"rank": rank, "name": "x" * rank})
    check("all_gather_object", got == [{"rank": r, "name": "x" * r} for r in range(world)], got)
    listed = [rank, "seven", {7: 7}] if rank == 1 else [None, None, None]
    dist.broadcast_object_list(listed, src=1)
    check("broadcast_object_list", listed == [1, "seven", {7: 7}], listed)
    out = [None] * world if rank == 0 else None
    dist.gather_object(("r", rank), out, dst=0)
    if rank == 0:
        check("gather_object", out == [("r", r) for r in range(world)], out)
    got = [None]
    dist.scatter_object_list(got, [f"for {r}" for r in range(world)] if rank == 3 else None, 3)
    check("scatter_object_list", got == [f"for {rank}"], got)


def heap_tensors(rank, world):
    """Tensors made on the symmetric heap are reduced and broadcast where they lie."""
    s = symmesh.distributed.session()
    t = s.empty((64, 3), dtype="float32", like="torch")
    t.fill_(rank + 1)
    dist.all_reduce(t)
    check("all_reduce of a heap tensor", bool((t == world * (world + 1) / 2).all()), t)
    b = s.empty(1000, dtype="bfloat16", like="torch")
    b.fill_(rank)
    dist.broadcast(b, world - 1)
    check("broadcast of a heap tensor", bool((b == world - 1).all()), b)
    s.free(b)
    s.free(t)


def bad_calls(rank, world):
    expect_error("a sparse tensor with MAX", lambda: dist.all_reduce(
        torch.eye(2).to_sparse(), op=R.MAX), ValueError, "allowed the SUM op")
    if rank == 0:  # refused before anything is sent: the others need not take part
        expect_error("scatter's list of the wrong length", lambda: dist.scatter(
            torch.zeros(1), [torch.zeros(1)], src=0), ValueError,
            f"scatter's inputs: 1 tensors; allowed one per rank of the group ({world})")
    dist.barrier()  # the session goes on


def run(rank, world, init):
    def body():
        for cycle in range(2):
            dist.init_process_group("symmesh", init_method=f"{init}{cycle}", rank=rank,
                                    world_size=world, timeout=datetime.timedelta(seconds=60))
            check("backend", dist.get_backend() == "symmesh", dist.get_backend())
            if cycle == 0:
                for part in (reductions, rooted, gathers, all_to_alls, asyncs, point_to_point,
                             subgroups, objects, heap_tensors, bad_calls):
                    part(rank, world)
            else:
                t = torch.full((8,), 1.0)
                dist.all_reduce(t)
                check("all_reduce after a second init", bool((t == world).all()), t)
            dist.destroy_process_group()

    report("distributed_test", rank, world, body)


if __name__ == "__main__":
    os.environ.setdefault("SYMMESH_P2P_ARENA_BYTES", str(256 << 10))  # chunks and waits
    os.environ.setdefault("SYMMESH_P2P_LANDING_BYTES", str(64 << 10))
    spawn(run, int(sys.argv[1]))
