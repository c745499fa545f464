"""ProcessGroupSymmesh: torch.distributed's ProcessGroup interface on one symmesh group.

torch calls these methods with lists of tensors (one per device; a CPU group takes one) and an
options object; each returns a Work (_work.py). Ranks here are the group's; the collectives are
_collectives.Group's, the users' messages go through the process's mailbox on the group's own
channel, matched by source and tag as gloo matches them.
"""

import datetime

import torch
import torch.distributed as dist

from . import _tensors
from ._collectives import Group
from ._work import Work, done

_NO_TIMEOUT = datetime.timedelta(milliseconds=-1)  # torch's "use the group's timeout"


def _in_order(method):
    """A call that first waits for the process's background call (a DeepEP async_finish one),
    so the daemon sees every rank's calls in one order."""

    def ordered(self, *args, **kwargs):
        self._group.pe.drain()
        return method(self, *args, **kwargs)

    ordered.__name__, ordered.__doc__ = method.__name__, method.__doc__
    return ordered


def _one(tensors, what):
    if len(tensors) != 1:
        raise ValueError(f"{what}: {len(tensors)} tensors: the symmesh backend takes one tensor "
                         f"per call (one CPU device)")
    return _tensors.check(tensors[0], what)


class ProcessGroupSymmesh(dist.ProcessGroup):
    def __init__(self, pe, rank, size, ranks, name, timeout):
        super().__init__(rank, size)
        self._group = Group(pe, ranks, name, timeout.total_seconds())
        self._timeout_s = timeout.total_seconds()

    def getBackendName(self):  # noqa: N802: torch's name
        return "symmesh"

    def _done(self, result):
        return done(result)

    # -- collectives --------------------------------------------------------------------------

    @_in_order
    def allreduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        if len(tensors) == 1 and getattr(tensors[0], "is_sparse", False):
            return self._sparse_allreduce(tensors[0], op)
        tensor = _one(tensors, "all_reduce")
        data = _tensors.dense(tensor)
        self._group.all_reduce(data, op)
        _tensors.write_back(tensor, data)
        return self._done(tensors)

    def _sparse_allreduce(self, tensor, op):
        """gloo's sparse all_reduce (SUM): every member's coalesced indices and values, summed
        into one coalesced tensor (the same on every member)."""
        if op != dist.ReduceOp.SUM:
            raise ValueError("all_reduce of a sparse tensor: allowed the SUM op (gloo's too)")
        mine = tensor.coalesce()
        indices, values = mine.indices().contiguous(), mine.values().contiguous()
        counts = self._group.all_gather_list(torch.tensor([indices.shape[1]]), "sparse all_reduce")
        nnz = [int(c.item()) for c in counts]
        all_indices = self._group.all_gather_list(
            indices, "sparse all_reduce", shapes=[(indices.shape[0], n) for n in nnz])
        all_values = self._group.all_gather_list(
            values, "sparse all_reduce", shapes=[(n,) + tuple(values.shape[1:]) for n in nnz])
        total = torch.sparse_coo_tensor(torch.cat(all_indices, 1), torch.cat(all_values),
                                        tensor.shape).coalesce()
        tensor.copy_(total)
        return self._done([tensor])

    @_in_order
    def allreduce_coalesced(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        for tensor in tensors:
            _tensors.check(tensor, "all_reduce_coalesced")
        # One call per dtype: the tensors of a dtype flattened end to end.
        for dtype in dict.fromkeys(t.dtype for t in tensors):
            same = [t for t in tensors if t.dtype == dtype]
            flat = torch.cat([t.reshape(-1) for t in same])
            self._group.all_reduce(flat, op)
            at = 0
            for t in same:
                t.copy_(flat[at:at + t.numel()].view_as(t))
                at += t.numel()
        return self._done(tensors)

    def _rooted(self, tensors, opts, what, call):
        """A call on one tensor with a root: call(data, root) on a contiguous stand-in."""
        tensor = _one(tensors, what)
        root = opts.rootRank if opts is not None else 0
        self._group.global_rank(root, f"{what}'s root")
        data = _tensors.dense(tensor)
        call(data, root)
        _tensors.write_back(tensor, data)
        return self._done(tensors)

    @_in_order
    def broadcast(self, tensors, opts=None):
        return self._rooted(tensors, opts, "broadcast", self._group.broadcast)

    @_in_order
    def reduce(self, tensors, opts=None):
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        return self._rooted(tensors, opts, "reduce",
                            lambda data, root: self._group.reduce(data, op, root))

    @_in_order
    def allgather(self, output_tensors, input_tensors, opts=None):
        data = _tensors.dense(_one(input_tensors, "all_gather"))
        outputs = _one_list(output_tensors, self._group.size, "all_gather's outputs")
        for out in outputs:
            _same_kind(out, data, "all_gather")
        for out, got in zip(outputs, self._group.all_gather_list(data)):
            out.copy_(got.view_as(out))
        return self._done(output_tensors)

    @_in_order
    def _allgather_base(self, output, input, opts=None):  # noqa: A002: torch's name
        data = _tensors.dense(_tensors.check(input, "all_gather_into_tensor's input"))
        _tensors.check(output, "all_gather_into_tensor's output")
        if output.numel() != data.numel() * self._group.size or output.dtype != data.dtype:
            raise ValueError(f"all_gather_into_tensor: the output has {output.numel()} "
                             f"{output.dtype}; allowed {data.numel() * self._group.size} "
                             f"{data.dtype} (the input's times the group's size)")
        gathered = torch.cat([g.reshape(-1) for g in self._group.all_gather_list(data)])
        output.copy_(gathered.view_as(output))
        return self._done([output])

    @_in_order
    def allgather_coalesced(self, output_lists, input_list, opts=None):
        for outputs, got in zip(output_lists, _transpose(
                [self._group.all_gather_list(_tensors.dense(t)) for t in input_list])):
            for out, piece in zip(outputs, got):
                out.copy_(piece.view_as(out))
        return self._done(output_lists)

    @_in_order
    def gather(self, output_tensors, input_tensors, opts=None):
        data = _tensors.dense(_one(input_tensors, "gather"))
        root = opts.rootRank if opts is not None else 0
        self._group.global_rank(root, "gather's root")
        if self._group.me == root:
            outputs = _one_list(output_tensors, self._group.size, "gather's outputs")
            for out in outputs:
                _same_kind(out, data, "gather")
        elif output_tensors and any(output_tensors):
            raise ValueError("gather: only the root passes output tensors")
        gathered = self._group.gather(data, root)
        if gathered is not None:
            for out, got in zip(output_tensors[0], gathered):
                out.copy_(got.view_as(out))
        return self._done(output_tensors)

    @_in_order
    def scatter(self, output_tensors, input_tensors, opts=None):
        tensor = _one(output_tensors, "scatter")
        root = opts.rootRank if opts is not None else 0
        self._group.global_rank(root, "scatter's root")
        parts = None
        if self._group.me == root:
            parts = _one_list(input_tensors, self._group.size, "scatter's inputs")
            for part in parts:
                _same_kind(part, tensor, "scatter")
        elif input_tensors and any(input_tensors):
            raise ValueError("scatter: only the root passes input tensors")
        data = _tensors.dense(tensor)
        self._group.scatter(data, parts, root)
        _tensors.write_back(tensor, data)
        return self._done(output_tensors)

    @_in_order
    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        tensor = _one(output_tensors, "reduce_scatter")
        parts = _one_list(input_tensors, self._group.size, "reduce_scatter's inputs")
        data = _tensors.dense(tensor)
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        self._group.reduce_scatter(data, parts, op)
        _tensors.write_back(tensor, data)
        return self._done(output_tensors)

    @_in_order
    def _reduce_scatter_base(self, output, input, opts=None):  # noqa: A002: torch's name
        _tensors.check(output, "reduce_scatter_tensor's output")
        _tensors.check(input, "reduce_scatter_tensor's input")
        n = self._group.size
        if input.numel() != output.numel() * n or input.dtype != output.dtype:
            raise ValueError(f"reduce_scatter_tensor: the input has {input.numel()} "
                             f"{input.dtype}; allowed {output.numel() * n} {output.dtype} (the "
                             f"output's times the group's size)")
        parts = list(_tensors.dense(input).reshape(-1).chunk(n)) if output.numel() else [
            output.reshape(-1)] * n
        data = _tensors.dense(output)
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        self._group.reduce_scatter(data.reshape(-1), parts, op)
        _tensors.write_back(output, data)
        return self._done([output])

    @_in_order
    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):  # noqa: A002
        _tensors.check(output, "all_to_all_single's output")
        _tensors.check(input, "all_to_all_single's input")
        n = self._group.size
        equal = not output_split_sizes and not input_split_sizes
        outs = _split(output, output_split_sizes, n, "all_to_all_single's output")
        ins = _split(_tensors.dense(input), input_split_sizes, n, "all_to_all_single's input")
        dense_out = [_tensors.dense(o) for o in outs]
        self._group.all_to_all(dense_out, ins, equal=equal)
        for o, d in zip(outs, dense_out):
            _tensors.write_back(o, d)
        return self._done([output])

    @_in_order
    def alltoall(self, output_tensors, input_tensors, opts=None):
        n = self._group.size
        outs = _one_list([output_tensors], n, "all_to_all's outputs")
        ins = _one_list([input_tensors], n, "all_to_all's inputs")
        dense_out = [_tensors.dense(o) for o in outs]
        self._group.all_to_all(dense_out, [_tensors.dense(i) for i in ins])
        for o, d in zip(outs, dense_out):
            _tensors.write_back(o, d)
        return self._done(output_tensors)

    @_in_order
    def barrier(self, opts=None):
        timeout = getattr(opts, "timeout", _NO_TIMEOUT)
        seconds = timeout.total_seconds() if timeout > datetime.timedelta(0) else None
        self._group.barrier(seconds)
        return self._done([])

    @_in_order
    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        if timeout is None:
            seconds = self._timeout_s
        else:  # a timedelta, or seconds as gloo's binding takes them
            seconds = getattr(timeout, "total_seconds", lambda: float(timeout))()
        self._group.monitored_barrier(seconds, wait_all_ranks)

    # -- point to point -----------------------------------------------------------------------

    def _p2p_work(self, op, result, what, source=None):
        return Work(result, self._group.pe.mailbox, [op], self._timeout_s, lambda: what,
                    source)

    @_in_order
    def send(self, tensors, dst, tag):
        tensor = _one(tensors, "send")
        target = self._group.global_rank(dst, "send's destination")
        data = _tensors.dense(tensor)
        what = f"send to rank {dst} (tag {tag}) on group {self._group.name!r}"
        op = self._group.pe.mailbox.send([target], self._group.p2p_channel, tag,
                                         data.data_ptr(), _tensors.nbytes(data), what=what)
        work = self._p2p_work(op, tensors, what)
        work._keep = data  # the bytes must live until they are copied out
        return work

    @_in_order
    def recv(self, tensors, src, tag):
        source = self._group.global_rank(src, "recv's source")
        return self._receive(tensors, source, tag, f"recv from rank {src}")

    @_in_order
    def recv_anysource(self, tensors, tag):
        return self._receive(tensors, None, tag, "recv from any rank")

    def _receive(self, tensors, source, tag, said):
        tensor = _one(tensors, "recv")
        data = _tensors.dense(tensor)
        what = f"{said} (tag {tag}) on group {self._group.name!r}"
        op = self._group.pe.mailbox.recv(source, self._group.p2p_channel, tag, data.data_ptr(),
                                         _tensors.nbytes(data), what=what)
        ranks = self._group.ranks
        work = self._p2p_work(op, tensors, what, source=lambda: ranks.index(op.matched[0]))
        return work.on_done(lambda: _tensors.write_back(tensor, data))


def _one_list(lists, size, what):
    if len(lists) != 1:
        raise ValueError(f"{what}: {len(lists)} lists: the symmesh backend takes one (one CPU "
                         f"device)")
    tensors = lists[0]
    if len(tensors) != size:
        raise ValueError(f"{what}: {len(tensors)} tensors; allowed one per rank of the group "
                         f"({size})")
    for t in tensors:
        _tensors.check(t, what)
    return list(tensors)


def _same_kind(tensor, like, what):
    if tensor.numel() != like.numel() or tensor.dtype != like.dtype:
        raise ValueError(f"{what}: a tensor of {tensor.numel()} {tensor.dtype} beside "
                         f"{like.numel()} {like.dtype}: allowed the same size and dtype on "
                         f"every rank")


def _split(tensor, sizes, n, what):
    """tensor's first dimension cut into n parts (`sizes` rows each, or equal parts)."""
    rows = tensor.shape[0] if tensor.dim() else 0
    if not sizes:
        if rows % n:
            raise ValueError(f"{what} has {rows} rows: allowed a multiple of the group's {n} "
                             f"ranks, or split sizes")
        sizes = [rows // n] * n
    if len(sizes) != n or sum(sizes) != rows or min(sizes) < 0:
        raise ValueError(f"{what}: split sizes {list(sizes)} for {rows} rows: allowed {n} "
                         f"sizes that add up to the rows")
    return list(tensor.split(list(sizes)))


def _transpose(lists):
    return [list(x) for x in zip(*lists)]
