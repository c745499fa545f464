"""The Python API on a running cluster, one process per PE under `symmesh launch`: heap tensors
(numpy and torch), every collective on and off the heap with the reductions, the fused ops
against torch's matmul, dispatch/combine on numpy arrays (their outputs lent, or into `out`),
the low-latency dispatch/combine on torch bfloat16 tensors, wrong calls raising ValueError
while the session goes on, and the wait statistics naming a rank made late. Prints one line per
check and exits non-zero on the first failure.
"""

import sys
import time

import numpy
import torch

import symmesh


def check(s, name, ok, detail=""):
    if not ok:
        print(f"api_test: rank {s.rank}: {name} FAILED {detail}", file=sys.stderr, flush=True)
        sys.exit(1)


def expect_value_error(s, name, call, words):
    try:
        call()
    except ValueError as e:
        check(s, name, words in str(e), f"message: {e}")
        return
    check(s, name, False, "no ValueError")


def main():
    s = symmesh.attach()
    w, r = s.world_size, s.rank
    check(s, "place", s.rank == s.node_rank * s.local_size + s.local_rank and 0 <= r < w)
    for timeout in (0, float("nan"), True, None):
        expect_value_error(s, f"attach with a timeout of {timeout!r}",
                           lambda: symmesh.attach(timeout=timeout),
                           f"attach: timeout {timeout!r}: allowed 0.001 to 3600 seconds")

    # Heap tensors: zero-copy collectives, in place.
    t = s.empty((4, 8), dtype="float32", like="torch")
    t.fill_(r + 1)
    s.all_reduce(t)
    check(s, "all_reduce on the heap (torch)", bool((t == w * (w + 1) / 2).all()))
    a = s.empty(16, dtype="float16", like="numpy")
    a[:] = r
    s.all_reduce(a, op="max")
    check(s, "all_reduce max on the heap (numpy f16)", bool((a == w - 1).all()))
    s.free(a)
    s.free(t)

    # Off the heap: copied in and out.
    x = torch.arange(2 * w * 3, dtype=torch.bfloat16).reshape(2 * w, 3) + r
    y = x.clone()
    s.all_reduce(y, op="min")
    check(s, "all_reduce min off the heap (bf16)", torch.equal(y, x - r))
    # In place: a read-only array is refused, naming it; a tensor that requires grad is
    # written outside autograd, as torch.distributed's all_reduce writes it (off the heap, and
    # not contiguous: the copy back goes through its detached view).
    frozen = numpy.frombuffer(bytes(16), "f4")
    expect_value_error(s, "all_reduce of a read-only array", lambda: s.all_reduce(frozen),
                       "all_reduce: its array is read-only")
    leaf = torch.ones(4, 2, requires_grad=True)
    s.all_reduce(leaf.t())
    check(s, "all_reduce of a tensor that requires grad",
          leaf.requires_grad and bool((leaf.detach() == w).all()))
    gathered = s.all_gather(numpy.full((2, 3), r, dtype=numpy.float32))
    check(s, "all_gather", gathered.shape == (2 * w, 3) and
          all((gathered[2 * p:2 * p + 2] == p).all() for p in range(w)))
    part = s.reduce_scatter(numpy.ones((2 * w, 5), dtype=numpy.float32))
    check(s, "reduce_scatter", part.shape == (2, 5) and bool((part == w).all()))
    blocks = numpy.repeat(numpy.arange(w, dtype=numpy.float32) + 10 * r, 3).reshape(w, 3)
    swapped = s.all_to_all(blocks)
    check(s, "all_to_all", all((swapped[p] == 10 * p + r).all() for p in range(w)))

    # The fused ops against torch on every PE's operands (each PE can make all of them).
    def operands(p):
        g = torch.Generator().manual_seed(p)
        return torch.randn(6, 16, generator=g), torch.randn(16, 8, generator=g)

    mine_a, mine_b = operands(r)
    want = sum(operands(p)[0] @ operands(p)[1] for p in range(w))
    c = s.gemm_all_reduce(mine_a, mine_b)
    check(s, "gemm_all_reduce", torch.allclose(c, want, atol=1e-4), f"{(c - want).abs().max()}")
    planned = s.gemm_all_reduce(mine_a, mine_b, mode="auto")  # plans, running both modes
    kept = s.gemm_all_reduce(mine_a, mine_b, mode="auto")
    check(s, "gemm_all_reduce auto", torch.allclose(planned, want, atol=1e-4) and
          torch.equal(planned, kept))
    expect_value_error(s, "an unknown mode", lambda: s.gemm_all_reduce(mine_a, mine_b,
                                                                       mode="fastest"), "fastest")
    c = s.matmul_reduce_scatter(mine_a, mine_b)
    rows = -(-6 // w)
    check(s, "matmul_reduce_scatter", torch.allclose(c, want[r * rows:(r + 1) * rows], atol=1e-4))
    c, g = s.all_gather_matmul(mine_a, mine_b)
    all_a = torch.cat([operands(p)[0] for p in range(w)])
    check(s, "all_gather_matmul", torch.equal(g, all_a) and torch.allclose(c, all_a @ mine_b,
                                                                           atol=1e-4))

    # Dispatch and combine on numpy: each token to experts r and r+1 (mod E), weight 1.
    experts, tokens, hidden = 2 * w, 5, 8
    x = numpy.arange(tokens * hidden, dtype=numpy.float32).reshape(tokens, hidden) + 100 * r
    idx = numpy.stack([(numpy.arange(tokens) + k) % experts for k in range(2)], axis=1)
    weights = numpy.ones((tokens, 2), dtype=numpy.float32)
    recv_x, recv_idx, recv_w, handle = s.dispatch(x, idx, weights, experts)
    check(s, "dispatch shapes", recv_x.shape[1] == hidden and recv_idx.dtype == numpy.int64 and
          recv_idx.shape == recv_w.shape == (recv_x.shape[0], 2))
    # Each local expert returns its token: a row is x times the experts it has here.
    rows_out = (recv_x * (recv_idx >= 0).sum(axis=1, keepdims=True)).astype(numpy.float32)
    y = s.combine(rows_out, handle, bias=numpy.ones_like(x))
    check(s, "combine", numpy.allclose(y, 2 * x + 1), f"{numpy.abs(y - 2 * x - 1).max()}")
    y2 = s.combine(rows_out, handle)
    check(s, "the handle is reusable", numpy.allclose(y2, 2 * x))
    # Rows made on the heap are read where they lie (every PE makes the same empty()).
    # Twice the rows there give twice the sums: the staging area still holds rows_out.
    on_heap = s.empty((tokens * w, hidden), dtype="float32")
    on_heap[:len(rows_out)] = 2 * rows_out
    y3 = s.combine(on_heap[:len(rows_out)], handle)
    check(s, "combine of rows on the heap", numpy.array_equal(y3, 2 * y2))
    s.free(on_heap)
    # The result into `out`: written where it lies on the heap, copied into any other.
    for out in (s.empty((tokens, hidden), dtype="float32"), numpy.empty((tokens, hidden), "f4")):
        out[:] = -7
        y4 = s.combine(rows_out, handle, out=out)
        check(s, f"combine into out (on the heap: {s.on_heap(out)})",
              y4 is out and numpy.array_equal(out, y2))
        if s.on_heap(out):
            s.free(out)
    expect_value_error(s, "an out of another shape",
                       lambda: s.combine(rows_out, handle, out=numpy.empty((tokens, 2), "f4")),
                       "out has shape")
    transposed = numpy.empty((hidden, tokens), "f4").T
    expect_value_error(s, "an out not contiguous",
                       lambda: s.combine(rows_out, handle, out=transposed), "not contiguous")
    read_only = numpy.frombuffer(bytes(tokens * hidden * 4), "f4").reshape(tokens, hidden)
    expect_value_error(s, "a read-only out",
                       lambda: s.combine(rows_out, handle, out=read_only), "read-only")
    expect_value_error(s, "a torch out for numpy rows",
                       lambda: s.combine(rows_out, handle, out=torch.empty(tokens, hidden)),
                       "allowed the same kind")
    expect_value_error(s, "a dispatch's out of another dtype",
                       lambda: s.dispatch(x, idx, weights, experts,
                                          out=numpy.empty((tokens * w, hidden), "f2")),
                       "out has shape")
    # An out over the rows on the heap is refused before anything is sent (node peers read
    # the rows while the sums are written); a PE that received nothing has no rows to overlap.
    both = s.empty((tokens * w + tokens, hidden), dtype="float32")
    last = len(rows_out) - 1
    both[:len(rows_out)] = rows_out
    if last >= 0:
        expect_value_error(s, "an out over the rows",
                           lambda: s.combine(both[:last + 1], handle, out=both[last:last + tokens]),
                           "overlaps combine's expert rows")
    s.free(both)
    with torch.enable_grad():
        wants = torch.from_numpy(x).requires_grad_()
        expect_value_error(s, "an out with gradients",
                           lambda: s.dispatch(wants, torch.from_numpy(idx),
                                              torch.from_numpy(weights), experts,
                                              out=torch.empty(tokens * w, hidden)),
                           "out= takes no gradients")
    x_on_heap = s.empty((tokens, hidden), dtype="float32")
    x_on_heap[:] = 2 * x
    heap_x, _, _, _ = s.dispatch(x_on_heap, idx, weights, experts)
    check(s, "dispatch of tokens on the heap", numpy.array_equal(heap_x, 2 * recv_x))
    s.free(x_on_heap)
    # recv_x into `out`: its first rows, written where they lie on the heap or copied into a
    # private room; a new tensor when the rows that arrive do not fit.
    room = s.empty((tokens * w, hidden), dtype="float32")
    for out in (room, numpy.empty((tokens * w, hidden), "f4"),
                numpy.empty((max(len(recv_x) - 1, 0), hidden), "f4")):
        out[:] = -7
        got, _, _, _ = s.dispatch(x, idx, weights, experts, out=out)
        fits = len(out) >= len(recv_x)
        check(s, f"dispatch into out of {len(out)} rows (on the heap: {s.on_heap(out)})",
              numpy.array_equal(got, recv_x) and (got.ctypes.data == out.ctypes.data) == fits)
    s.free(room)
    # With no out, recv_x and the combine's result are lent where the daemon wrote them: later
    # calls go around them, so they keep their values, and they are the caller's to write.
    kept_x, kept_y = recv_x.copy(), y2.copy()
    for _ in range(3):
        again_x, _, _, again = s.dispatch(x + 1, idx, weights, experts)
        s.combine(again_x * 0, again)
    check(s, "lent outputs keep their values through later calls",
          numpy.array_equal(recv_x, kept_x) and numpy.array_equal(y2, kept_y))
    check(s, "a lent output is writable", recv_x.flags.writeable and y2.flags.writeable)

    # The low-latency mode on torch bfloat16: the same routing, weights 0.5 and 0.25; each
    # expert returns its tokens as they came, so a token comes back as 0.75 x.
    tx = torch.from_numpy(x).to(torch.bfloat16)
    tw = torch.tensor([[0.5, 0.25]] * tokens, dtype=torch.float32)
    for _ in range(3):  # both halves of the buffer, then the first again
        ll_x, counts, ll = s.low_latency_dispatch(tx, torch.from_numpy(idx), tw, experts, 8)
        check(s, "low-latency counts", counts.dtype == torch.int64 and
              counts.shape == (experts // w,) and int(counts.sum()) == ll_x.shape[0])
        y = s.low_latency_combine(ll_x, ll)
        check(s, "low-latency combine", y.dtype == torch.bfloat16 and
              torch.equal(y, (0.75 * tx.float()).to(torch.bfloat16)))
    # Tokens and rows on the heap, twice the others: twice the rows, twice the result.
    ll_tokens = s.empty((tokens, hidden), dtype="bfloat16", like="torch")
    ll_tokens.copy_(2 * tx)
    ll_rows = s.empty((w * 8 * 2, hidden), dtype="bfloat16", like="torch")
    heap_ll_x, _, heap_ll = s.low_latency_dispatch(ll_tokens, torch.from_numpy(idx), tw, experts, 8)
    check(s, "low-latency dispatch of tokens on the heap", torch.equal(heap_ll_x, 2 * ll_x))
    ll_rows[:len(heap_ll_x)] = heap_ll_x
    ll_room = s.empty((w * 8 * 2, hidden), dtype="bfloat16", like="torch")
    ll_room.fill_(-7)
    room_ll_x, _, room_ll = s.low_latency_dispatch(tx, torch.from_numpy(idx), tw, experts, 8,
                                                   out=ll_room)
    check(s, "low-latency dispatch into out on the heap", torch.equal(room_ll_x, ll_x) and (
        len(room_ll_x) == 0 or room_ll_x.data_ptr() == ll_room.data_ptr()))
    room_ll.release()
    s.free(ll_room)
    ll_out = s.empty((tokens, hidden), dtype="bfloat16", like="torch")
    ll_out.fill_(-7)
    y_heap = s.low_latency_combine(ll_rows[:len(heap_ll_x)], heap_ll, out=ll_out)
    check(s, "low-latency combine of rows on the heap into out on the heap",
          y_heap is ll_out and torch.equal(ll_out, 2 * y))
    s.free(ll_out)
    s.free(ll_rows)
    s.free(ll_tokens)
    first = s.low_latency_dispatch(tx, torch.from_numpy(idx), tw, experts, 8)
    second = s.low_latency_dispatch(tx, torch.from_numpy(idx), tw, experts, 8)
    expect_value_error(s, "a third low-latency dispatch",
                       lambda: s.low_latency_dispatch(tx, torch.from_numpy(idx), tw, experts, 8),
                       "is not yet combined")
    s.low_latency_combine(first[0], first[2])
    expect_value_error(s, "a second low-latency combine",
                       lambda: s.low_latency_combine(first[0], first[2]), "combined already")
    narrow = second[0][:, :4]
    expect_value_error(s, "low-latency rows of another shape",
                       lambda: s.low_latency_combine(narrow, second[2]), "expert_out is")
    s.low_latency_combine(second[0], second[2])

    # active_ranks: the last rank left out of both modes. Token 0 chose only its experts
    # (dropped: zeros, or just the bias), token 1 one of them (the other expert's row alone).
    if w > 1:
        mask = [True] * (w - 1) + [False]
        last = 2 * (w - 1)
        midx = idx.copy()
        midx[0], midx[1] = [last, last + 1], [0, last + 1]
        mx, mrecv_idx, _, mh = s.dispatch(x, midx, weights, experts, active_ranks=mask)
        check(s, "active_ranks: nothing reaches a rank left out", r != w - 1 or len(mx) == 0)
        mrows = (mx * (mrecv_idx >= 0).sum(axis=1, keepdims=True)).astype(numpy.float32)
        my = s.combine(mrows, mh, bias=numpy.ones_like(x))
        active = numpy.array(mask)[midx // 2]  # per slot: its expert's rank is active
        expected = x * active.sum(axis=1, keepdims=True) + 1
        dropped = numpy.nonzero(~active.any(axis=1))[0].tolist()
        check(s, "active_ranks: combine over the active experts", numpy.array_equal(my, expected),
              f"{my} against {expected}")
        check(s, "active_ranks: the dropped tokens",
              dropped[0] == 0 and mh.dropped_tokens.tolist() == dropped and mh.active_ranks == mask)
        ll_mx, _, ll_mh = s.low_latency_dispatch(tx, torch.from_numpy(midx), tw, experts, 8,
                                                 active_ranks=torch.tensor(mask))
        ly = s.low_latency_combine(ll_mx, ll_mh)
        gate = (tw * torch.from_numpy(active)).sum(dim=1, keepdim=True)  # 0.75, 0.5 or 0
        check(s, "active_ranks: the low-latency combine over the active experts",
              torch.equal(ly, (gate * tx.float()).to(torch.bfloat16))
              and ll_mh.dropped_tokens.tolist() == dropped)
        expect_value_error(s, "an active_ranks of the wrong length",
                           lambda: s.dispatch(x, idx, weights, experts, active_ranks=[True]),
                           "one entry per rank")
        expect_value_error(s, "float topk_idx with active_ranks",
                           lambda: s.dispatch(x, idx.astype("f4"), weights, experts,
                                              active_ranks=mask), "allowed an integer type")
        int_mask = [1] * (w - 1) + [0]
        _, _, _, ih = s.dispatch(x, midx, weights, experts, active_ranks=int_mask)
        check(s, "active_ranks as 0 and 1", ih.dropped_tokens.tolist() == dropped)

    # A node left out (all its ranks masked), as an elastic session serves once it lost one: its
    # processes do not call (one that does gets ValueError, and the session goes on), the
    # others' dispatch and combine run without it, and then every node serves again (below).
    if s.local_size < w:
        node_mask = [rank // s.local_size != 1 for rank in range(w)]
        if s.node_rank == 1:
            expect_value_error(s, "a process of a node left out that calls",
                               lambda: s.dispatch(x, idx, weights, experts, active_ranks=node_mask),
                               "the processes of a node left out do not call")
        else:
            nx, nidx, _, nh = s.dispatch(x, idx, weights, experts, active_ranks=node_mask)
            nrows = (nx * (nidx >= 0).sum(axis=1, keepdims=True)).astype(numpy.float32)
            ny = s.combine(nrows, nh, bias=numpy.ones_like(x))
            kept = numpy.array(node_mask)[idx // 2]
            check(s, "a node left out: combine over the other nodes' experts",
                  numpy.array_equal(ny, x * kept.sum(axis=1, keepdims=True) + 1), f"{ny}")
        s.barrier()

    # Wrong calls: ValueError naming what, and the session goes on.
    expect_value_error(s, "a stale handle", lambda: (handle.release(), s.combine(rows_out, handle)),
                       "released")
    _, _, _, h2 = s.dispatch(x, idx, weights, experts)
    too_many = numpy.zeros((h2.num_received + 1, hidden), dtype=numpy.float32)
    expect_value_error(s, "a wrong number of rows", lambda: s.combine(too_many, h2), "rows")
    expect_value_error(s, "an expert out of range",
                       lambda: s.dispatch(x, idx + experts, weights, experts), "names expert")
    expect_value_error(s, "a wrong dtype", lambda: s.all_reduce(numpy.zeros(4, numpy.int32)),
                       "dtype int32")
    expect_value_error(s, "a wrong shape", lambda: s.reduce_scatter(numpy.ones((w + 1, 2),
                                                                               numpy.float32)),
                       "multiple of")

    # Wait statistics, as DeepEP keeps them: rank 0 is late into a barrier, so it waits least.
    before = s.wait_stats()
    check(s, "wait_stats", len(before["wait_by_peer_s"]) == w and
          min(before["wait_by_peer_s"]) >= 0 and
          before["blocked_s"] >= sum(before["wait_by_peer_s"]) - 1e-6, f"{before}")
    if r == 0:
        time.sleep(0.3)
    s.barrier()
    grew = numpy.array([s.wait_stats()["blocked_s"] - before["blocked_s"]], dtype=numpy.float32)
    everyone = s.all_gather(grew)
    check(s, "the late rank waited least", int(numpy.argmin(everyone)) == 0, f"{everyone}")
    s.barrier()
    rank = s.rank
    s.close()
    if not numpy.array_equal(y2, kept_y):  # a lent output outlives its session
        print(f"api_test: rank {rank}: a lent output changed when its session closed FAILED",
              file=sys.stderr, flush=True)
        sys.exit(1)
    print(f"api_test: rank {r} of {w}: every check passed", flush=True)


if __name__ == "__main__":
    main()
