"""symmesh from Python: this process as one PE of a symmesh cluster.

    s = symmesh.attach()          # in a process started by `symmesh launch`
    t = s.empty((n, h), dtype="float32", like="torch")   # a tensor on the symmetric heap
    s.all_reduce(t)
    recv_x, recv_topk_idx, recv_topk_weights, handle = s.dispatch(x, topk_idx, topk_weights, E)
    y = s.combine(expert_out, handle)

Tensors are numpy arrays or CPU torch tensors of float32, bfloat16 (torch only: numpy has no
bfloat16) or float16. Collectives work in place on tensors made by `empty` (zero-copy); any
other tensor is copied onto the heap and back. Dispatch, combine and the fused ops copy
their inputs into the PE's private staging area, except that a dispatch's x and a combine's
expert rows made by `empty` are read where they lie. Their large outputs (recv_x, a combine's
result) are not copied out: they are tensors over the staging area where the daemon wrote them,
each lent until it is garbage collected (the area holds them as long as they live), or written
into an `out` the caller passes (where it lies when `empty` made it). Every PE makes the same
calls in the same order with the same shapes, and a tensor made by `empty` on one PE is made by
`empty` on all.

A wrong call raises ValueError naming what was wrong and leaves the session as it was; a call
the cluster could not carry out raises RuntimeError (TimeoutError at a deadline) and ends the
session on every PE.
"""

import ctypes
import math

import numpy

from . import _symmesh
from ._active_ranks import mask_routing

__all__ = ["attach", "Session", "DispatchHandle"]

# dtype words the native calls take, by the names numpy and torch give them.
_WORDS = {"float32": "f32", "bfloat16": "bf16", "float16": "f16"}
_SIZES = {"f32": 4, "bf16": 2, "f16": 2}


def _torch():
    import torch  # only when a torch tensor is passed or asked for

    return torch


def _is_torch(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def _kind(x, what):
    if isinstance(x, numpy.ndarray):
        return "numpy"
    if _is_torch(x):
        if x.device.type != "cpu":
            raise ValueError(f"{what} is on {x.device}: symmesh takes CPU tensors")
        return "torch"
    raise ValueError(f"{what} is a {type(x).__name__}: allowed a numpy array or a torch tensor")


def _dtype_name(x):
    return str(x.dtype).replace("torch.", "")


def _word(x, what):
    name = _dtype_name(x)
    if name not in _WORDS:
        raise ValueError(f"{what} has dtype {name}: allowed float32, bfloat16, float16")
    return _WORDS[name]


def _address(x):
    return x.data_ptr() if _is_torch(x) else x.ctypes.data


def _numel(x):
    return x.numel() if _is_torch(x) else x.size


def _nbytes(x):
    return x.numel() * x.element_size() if _is_torch(x) else x.nbytes


def _contiguous(x):
    if _is_torch(x):
        return x if x.is_contiguous() else x.contiguous()
    return numpy.ascontiguousarray(x)


def _new(shape, name, like):
    """An empty tensor of numpy or torch (`like`) with dtype `name`."""
    if like == "torch":
        return _torch().empty(shape, dtype=getattr(_torch(), name))
    if like == "numpy":
        if name == "bfloat16":
            raise ValueError("numpy has no bfloat16: use like='torch'")
        return numpy.empty(shape, dtype=name)
    raise ValueError(f"like={like!r}: allowed 'numpy' or 'torch'")


def _new_as(x, shape, name=None):
    return _new(shape, name or _dtype_name(x), "torch" if _is_torch(x) else "numpy")


def _out(out, shape, like, what):
    """A tensor for a result of `shape` (None: any number of rows) in like's dtype: `out` once
    checked, else a new one."""
    if out is None:
        return _new_as(like, shape)
    _kind(out, f"{what}'s out")
    fits = len(out.shape) == len(shape) and all(
        want is None or int(got) == want for got, want in zip(out.shape, shape))
    if not fits or _dtype_name(out) != _dtype_name(like):
        allowed = ", ".join("rows" if want is None else str(want) for want in shape)
        raise ValueError(f"{what}: out has shape {tuple(out.shape)} and dtype "
                         f"{_dtype_name(out)}; allowed ({allowed}), {_dtype_name(like)}")
    if _is_torch(out) != _is_torch(like):
        raise ValueError(f"{what}: out is a {type(out).__name__} and the input a "
                         f"{type(like).__name__}: allowed the same kind")
    if _is_torch(out):
        writable, contiguous = not out.requires_grad, out.is_contiguous()
    else:
        writable, contiguous = out.flags.writeable, out.flags["C_CONTIGUOUS"]
    if not writable:
        raise ValueError(f"{what}: out is read-only or requires grad: allowed a tensor the "
                         f"result may be written into")
    if not contiguous:
        raise ValueError(f"{what}: out is not contiguous: allowed a contiguous tensor (the "
                         f"result is written into its memory)")
    return out


def _room(out, x, hidden, what):
    """A dispatch's `out` checked to take rows of x's hidden and dtype, or None."""
    return None if out is None else _out(out, (None, hidden), x, what)


def _room_words(room):
    """What the native dispatch takes for a room: its address and rows (0, 0 for none)."""
    return (0, 0) if room is None else (_address(room), int(room.shape[0]))


def _recv_x(room, received):
    """recv_x in the room's first rows when they hold what arrived, else None: lent."""
    if room is not None and received <= int(room.shape[0]):
        return room[:received]
    return None


def _lent(loan, like, shape):
    """A tensor of like's kind and dtype over a lent output (None: no rows)."""
    count = math.prod(shape)
    if loan is None or count == 0:
        return _new_as(like, shape)
    name = _dtype_name(like)
    if _is_torch(like):
        torch = _torch()
        return torch.frombuffer(loan, dtype=getattr(torch, name), count=count).reshape(shape)
    return numpy.frombuffer(loan, dtype=name, count=count).reshape(shape)


def _address_or_0(tensor):
    return 0 if tensor is None else _address(tensor)


def _no_gradients(out, what):
    if out is not None:
        raise ValueError(f"{what}: out= takes no gradients (as torch's out= arguments): leave "
                         f"it out, or call under torch.no_grad()")


def _copy(dst, src, nbytes):
    if nbytes:
        ctypes.memmove(dst, src, nbytes)


def _shape2(x, what):
    if len(x.shape) != 2:
        raise ValueError(f"{what} has shape {tuple(x.shape)}: allowed 2 dimensions")
    return tuple(int(d) for d in x.shape)


def _check_topk_idx(topk_idx):
    _kind(topk_idx, "topk_idx")
    _shape2(topk_idx, "topk_idx")
    if not _dtype_name(topk_idx).startswith(("int", "uint")):
        raise ValueError(f"topk_idx has dtype {_dtype_name(topk_idx)}: allowed an integer type")


class DispatchHandle:
    """What combine needs to send rows back the way a dispatch's tokens came (DeepEP's handle).

    Reusable for any number of combines of that dispatch (a low-latency dispatch's: for one
    low_latency_combine); released when it is garbage collected or by release(); a released
    handle, or one of another session, raises ValueError.
    """

    def __init__(self, session, native, topk_idx, topk_weights, num_experts, active_nodes=0):
        self._session = session
        self._native = native
        self.num_tokens = native.tokens
        self.num_received = native.received
        self.hidden = native.hidden
        self.num_experts = num_experts
        # The routing, for a backward pass that sends gradients along the same paths.
        self.topk_idx = topk_idx
        self.topk_weights = topk_weights
        self._active_nodes = active_nodes  # the nodes it ran on, a bit each (0: all)
        self._anchor = None  # a differentiable dispatch's output (symmesh.torch)
        # With active_ranks: the mask, and this PE's tokens it left without an expert.
        self.active_ranks = None
        self.dropped_tokens = None

    def release(self):
        self._native = None

    def _checked(self, session):
        if self._native is None:
            raise ValueError("the dispatch handle was released: dispatch again")
        if self._session is not session or session._native is None:
            raise ValueError("the dispatch handle is from another session")
        return self._native


class Session:
    """This process's PE. Made by attach(); close() (or the end of the process) detaches."""

    def __init__(self, native):
        self._native = native
        self._allocations = {}  # heap address -> bytes, for free()

    def _s(self):
        if self._native is None:
            raise ValueError("the session is closed")
        return self._native

    def close(self):
        """Detaches from the PE; tensors made by empty() must not be used after."""
        self._native = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    rank = property(lambda self: self._s().rank)
    world_size = property(lambda self: self._s().world_size)
    local_rank = property(lambda self: self._s().local_rank)
    local_size = property(lambda self: self._s().local_size)
    node_rank = property(lambda self: self._s().node_rank)

    # -- the symmetric heap ------------------------------------------------------------------

    def empty(self, shape, dtype="float32", like="numpy"):
        """A tensor on the symmetric heap (uninitialised): collectives on it copy nothing.

        Symmetric: every PE makes the same empty() and free() calls in the same order.
        """
        shape = (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)
        if dtype not in _WORDS:
            raise ValueError(f"dtype {dtype!r}: allowed float32, bfloat16, float16")
        if like == "numpy" and dtype == "bfloat16":
            raise ValueError("numpy has no bfloat16: use like='torch'")
        if like not in ("numpy", "torch"):
            raise ValueError(f"like={like!r}: allowed 'numpy' or 'torch'")
        count = math.prod(shape)
        nbytes = count * _SIZES[_WORDS[dtype]]
        address = self._s().malloc(max(nbytes, 1))
        self._allocations[address] = nbytes
        view = self._s().heap_view(address, nbytes)
        if like == "torch":
            torch = _torch()
            if count == 0:
                return torch.empty(shape, dtype=getattr(torch, dtype))
            return torch.frombuffer(view, dtype=getattr(torch, dtype), count=count).reshape(shape)
        return numpy.frombuffer(view, dtype=dtype, count=count).reshape(shape)

    def free(self, tensor):
        """Gives back a tensor made by empty() (symmetric, like empty)."""
        address = _address(tensor)
        if address not in self._allocations:
            raise ValueError("free: the tensor was not made by empty() (or was freed)")
        del self._allocations[address]
        self._s().free(address)

    def on_heap(self, tensor):
        return self._s().on_heap(_address(tensor), _nbytes(tensor))

    def _heap_scratch(self, nbytes):
        return self._s().malloc(max(nbytes, 1))

    # -- collectives -------------------------------------------------------------------------

    def barrier(self):
        self._s().barrier()

    def ping(self):
        """A call that does nothing: the round trip to the daemon."""
        self._s().ping()

    def wait_stats(self):
        """How long this PE's calls have waited since the session began, as DeepEP keeps its
        wait statistics per rank: a dict with wait_by_peer_s (for each PE, the seconds this
        PE's waits blocked on a word only that PE writes: its data, its signal, its entering a
        call) and blocked_s (all the seconds they blocked). The slow PE is the one the others
        wait for, and that itself hardly waits."""
        return self._s().wait_stats()

    def all_reduce(self, x, op="sum"):
        """In place: x becomes the reduction (sum, max, min) of every PE's x. Returns x."""
        _kind(x, "all_reduce's tensor")
        if not _is_torch(x) and not x.flags.writeable:
            raise ValueError("all_reduce: its array is read-only: allowed a writable one (the "
                             "reduction is written into it)")
        # Written in place outside autograd, as torch.distributed's all_reduce writes: through
        # the detached view of a tensor that requires grad.
        target = x.detach() if _is_torch(x) else x
        word = _word(x, "all_reduce's tensor")
        data = _contiguous(target)
        if _numel(data) == 0:
            return x
        if self.on_heap(data):
            self._s().all_reduce(_address(data), _address(data), _numel(data), word, op)
        else:  # out of place between two heap scratches, then back into data
            self._exchange(lambda d, s, c, w: self._s().all_reduce(d, s, c, w, op), data,
                           tuple(data.shape), "all_reduce's tensor", out=data)
        if data is not target:
            target[...] = data
        return x

    def _exchange(self, call, x, out_shape, what, out=None):
        """Runs a collective from x into a new tensor of out_shape (or `out`), on the heap."""
        _kind(x, what)
        word = _word(x, what)
        data = _contiguous(x)
        count = _numel(data)
        if count == 0:
            raise ValueError(f"{what} is empty")
        result = _out(out, out_shape, x, what)
        in_bytes, out_bytes = _nbytes(data), _nbytes(result)
        src = _address(data) if self.on_heap(data) else None
        dst = _address(result) if self.on_heap(result) else None
        scratch = []
        try:
            if src is None:
                src = self._heap_scratch(in_bytes)
                scratch.append(src)
                _copy(src, _address(data), in_bytes)
            if dst is None:
                dst = self._heap_scratch(out_bytes)
                scratch.append(dst)
            call(dst, src, count, word)
            if dst != _address(result):
                _copy(_address(result), dst, out_bytes)
        finally:
            for address in reversed(scratch):
                self._s().free(address)
        return result

    def _rows_split(self, x, what):
        rows = int(x.shape[0]) if len(x.shape) else 0
        if rows % self.world_size:
            raise ValueError(f"{what} has {rows} rows: allowed a multiple of the "
                             f"{self.world_size} PEs")
        return rows // self.world_size

    def reduce_scatter(self, x, op="sum", out=None):
        """This PE's block of rows of the reduction of every PE's x (rows: a multiple of W)."""
        rows = self._rows_split(x, "reduce_scatter's tensor")
        return self._exchange(lambda d, s, c, w: self._s().reduce_scatter(d, s, c, w, op), x,
                              (rows,) + tuple(x.shape[1:]), "reduce_scatter's tensor", out)

    def all_gather(self, x, out=None):
        """Every PE's x, stacked along the first dimension in rank order."""
        shape = (int(x.shape[0]) * self.world_size,) + tuple(x.shape[1:])
        return self._exchange(self._s().all_gather, x, shape, "all_gather's tensor", out)

    def all_to_all(self, x, out=None):
        """Block j of x's rows goes to PE j; block i of the result came from PE i."""
        self._rows_split(x, "all_to_all's tensor")
        return self._exchange(lambda d, s, c, w: self._s().all_to_all(d, s, c // self.world_size, w),
                              x, tuple(x.shape), "all_to_all's tensor", out)

    # -- MoE ---------------------------------------------------------------------------------

    def _masked(self, topk_idx, num_experts, active_ranks):
        if active_ranks is None:
            return topk_idx, None
        _check_topk_idx(topk_idx)  # before it is read
        return mask_routing(topk_idx, num_experts, self.world_size, active_ranks)

    def _active_nodes(self, active_ranks):
        """The nodes with an active rank, a bit each (0: all, or no mask)."""
        if active_ranks is None:
            return 0
        per_node = self.local_size
        ranks = [bool(a) for a in (active_ranks.tolist() if hasattr(active_ranks, "tolist")
                                   else active_ranks)]
        count = self.world_size // per_node
        nodes = 0
        for node in range(count):
            if any(ranks[node * per_node:(node + 1) * per_node]):
                nodes |= 1 << node
        if nodes == (1 << count) - 1:
            return 0
        if count > 64:
            raise ValueError(f"active_ranks leaves a node out: that needs a cluster of at most 64 "
                             f"nodes; this one has {count}")
        return nodes

    @staticmethod
    def _note_mask(handle, active_ranks, dropped):
        if active_ranks is not None:
            handle.active_ranks = [bool(a) for a in active_ranks]
            handle.dropped_tokens = dropped

    def dispatch(self, x, topk_idx, topk_weights, num_experts, out=None, active_ranks=None):
        """DeepEP's dispatch: PE r holds experts [r*E/W, (r+1)*E/W).

        x [tokens, hidden]; topk_idx [tokens, topk] (integers, -1 for an unused slot);
        topk_weights [tokens, topk] float32. Returns recv_x (each token with an expert here,
        once, ordered by source PE then token), recv_topk_idx (int64: the local expert index,
        or -1 where the expert lives elsewhere), recv_topk_weights, and the handle combine
        takes. Torch tensors that need gradients go through symmesh.torch. x made by `empty`
        is read where it lies; any other is copied into the staging area first. With `out`
        (contiguous, [rows, hidden], x's kind and dtype; no gradients) recv_x is out's first
        rows when they hold what arrives (all PEs' tokens together always do), written where
        they lie when `empty` made out (not over x); else, as with no out, a tensor over the
        staging area where the daemon wrote it (lent: nothing copied; see the module's notes).

        active_ranks (one boolean per rank; Mooncake EP's mask) leaves the ranks it marks False
        out: their experts' slots become -1, so nothing goes there, and a token whose experts
        all sit there combines to zeros (or just the bias). handle.dropped_tokens lists those
        tokens (int64, topk_idx's kind: a numpy array or a torch tensor), handle.active_ranks the
        mask. Gate weights are not renormalised. A node all of whose ranks are left out takes
        no part, as after an elastic session lost it: its processes do not call (one that does
        gets ValueError), and this dispatch and its combines run on the other nodes alone.
        """
        topk_idx, dropped = self._masked(topk_idx, num_experts, active_ranks)
        nodes = self._active_nodes(active_ranks)
        if _is_torch(x) and _torch().is_grad_enabled() and (
                x.requires_grad or getattr(topk_weights, "requires_grad", False)):
            _no_gradients(out, "dispatch")
            from . import torch as symmesh_torch

            result = symmesh_torch.dispatch(self, x, topk_idx, topk_weights, num_experts, nodes)
        else:
            result = self._dispatch(x, topk_idx, topk_weights, num_experts, out, nodes)
        self._note_mask(result[3], active_ranks, dropped)
        return result

    def _routing_inputs(self, x, topk_idx, topk_weights):
        """A dispatch's inputs checked and made contiguous: (x, ids int64, weights, word,
        tokens, hidden)."""
        _kind(x, "x")
        word = _word(x, "x")
        tokens, hidden = _shape2(x, "x")
        for name, t in (("topk_idx", topk_idx), ("topk_weights", topk_weights)):
            _kind(t, name)
            if _shape2(t, name)[0] != tokens:
                raise ValueError(f"{name} has shape {tuple(t.shape)}: x has {tokens} tokens")
        topk = int(topk_idx.shape[1])
        if tuple(topk_weights.shape) != (tokens, topk):
            raise ValueError(f"topk_weights has shape {tuple(topk_weights.shape)}; topk_idx has "
                             f"{(tokens, topk)}")
        if _dtype_name(topk_weights) != "float32":
            raise ValueError(f"topk_weights has dtype {_dtype_name(topk_weights)}: allowed float32")
        _check_topk_idx(topk_idx)
        ids = (topk_idx.detach().to(dtype=_torch().int64).contiguous() if _is_torch(topk_idx)
               else numpy.ascontiguousarray(topk_idx, dtype=numpy.int64))
        weights = (topk_weights.detach().contiguous() if _is_torch(topk_weights)
                   else numpy.ascontiguousarray(topk_weights))
        data = _contiguous(x.detach() if _is_torch(x) else x)
        return data, ids, weights, word, tokens, hidden

    def _dispatch(self, x, topk_idx, topk_weights, num_experts, out=None, active_nodes=0):
        data, ids, weights, word, tokens, hidden = self._routing_inputs(x, topk_idx, topk_weights)
        topk = int(ids.shape[1])
        room = _room(out, x, hidden, "dispatch")
        outputs = []

        def allocate(received):
            outputs.extend([
                _recv_x(room, received),
                _new_as(x, (received, topk), "int64"),
                _new_as(x, (received, topk), "float32"),
            ])
            return tuple(_address_or_0(t) for t in outputs)

        native, loan = self._s().dispatch(_address(data), _address(ids), _address(weights),
                                          tokens, hidden, topk, int(num_experts), word, allocate,
                                          *_room_words(room), active_nodes)
        handle = DispatchHandle(self, native, ids, weights, int(num_experts), active_nodes)
        recv_x = outputs[0] if outputs[0] is not None else _lent(loan, x, (native.received, hidden))
        return recv_x, outputs[1], outputs[2], handle

    def combine(self, expert_out, handle, bias=None, out=None):
        """DeepEP's combine: for every token this PE dispatched, the sum over the PEs that
        received it of their row of expert_out ([received, hidden]), plus bias [tokens, hidden].
        Hierarchical (one transfer per node between nodes) and bitwise deterministic.
        expert_out made by `empty` (the experts writing their output there) is read where it
        lies; any other is copied into the staging area first. The result goes into `out` when
        given (contiguous, [tokens, hidden], expert_out's kind and dtype; no gradients), written
        where it lies when `empty` made it (not over expert_out); else it is a tensor over the
        staging area where the daemon wrote it (lent: nothing copied). After a failed call, out
        may hold part of the result.
        """
        if not isinstance(handle, DispatchHandle):
            raise ValueError(f"handle is a {type(handle).__name__}: pass what dispatch returned")
        if _is_torch(expert_out) and _torch().is_grad_enabled() and (
                expert_out.requires_grad or getattr(bias, "requires_grad", False)
                or handle._anchor is not None):
            _no_gradients(out, "combine")
            from . import torch as symmesh_torch

            return symmesh_torch.combine(self, expert_out, handle, bias)
        return self._combine(expert_out, handle, bias, out)

    def _combine(self, expert_out, handle, bias=None, out=None):
        native = handle._checked(self)
        _kind(expert_out, "expert_out")
        word = _word(expert_out, "expert_out")
        rows, hidden = _shape2(expert_out, "expert_out")
        if rows != native.received:
            raise ValueError(f"expert_out has {rows} rows: its dispatch delivered "
                             f"{native.received} tokens here (one row each)")
        data = _contiguous(expert_out.detach() if _is_torch(expert_out) else expert_out)
        bias_address = 0
        if bias is not None:
            _kind(bias, "bias")
            if tuple(bias.shape) != (native.tokens, hidden) or _dtype_name(bias) != _dtype_name(
                    expert_out):
                raise ValueError(f"bias has shape {tuple(bias.shape)} and dtype "
                                 f"{_dtype_name(bias)}; allowed {(native.tokens, hidden)}, "
                                 f"{_dtype_name(expert_out)}")
            bias = _contiguous(bias.detach() if _is_torch(bias) else bias)
            bias_address = _address(bias)
        shape = (native.tokens, hidden)
        if out is None:
            return _lent(self._s().combine(native, _address(data), hidden, word, bias_address, 0),
                         expert_out, shape)
        out = _out(out, shape, expert_out, "combine")
        self._s().combine(native, _address(data), hidden, word, bias_address, _address(out))
        return out

    # -- the low-latency mode (decoding) -------------------------------------------------------

    def low_latency_dispatch(self, x, topk_idx, topk_weights, num_experts, max_tokens,
                             out=None, active_ranks=None):
        """DeepEP's low_latency_dispatch, for decoding: the routing as for dispatch, at most
        max_tokens tokens per PE (every PE passes the same max_tokens, hidden, topk, experts and
        dtype: they size the session's buffer, made again when they change). x made by `empty`
        is read where it lies, and `out` takes recv_x as for dispatch (world_size * max_tokens *
        min(topk, local experts) rows always hold it).

        Returns recv_x [received, hidden] packed by local expert (within one: by source PE, then
        token; a token once per local expert it chose), recv_counts (int64 [local experts]) and
        the handle low_latency_combine takes. Two dispatches may be in flight (two
        micro-batches); each is combined once, or its handle released, before a third. No
        gradients: the mode is for inference. active_ranks: as for dispatch.
        """
        topk_idx, dropped = self._masked(topk_idx, num_experts, active_ranks)
        data, ids, weights, word, tokens, hidden = self._routing_inputs(x, topk_idx, topk_weights)
        room = _room(out, x, hidden, "low_latency_dispatch")
        outputs = []

        def allocate(received):
            outputs.extend([
                _recv_x(room, received),
                _new_as(x, (num_experts // self.world_size,), "int64"),
            ])
            return tuple(_address_or_0(t) for t in outputs)

        native, loan = self._s().low_latency_dispatch(
            _address(data), _address(ids), _address(weights), tokens, hidden, int(ids.shape[1]),
            int(num_experts), int(max_tokens), word, allocate, *_room_words(room))
        handle = DispatchHandle(self, native, ids, weights, int(num_experts))
        self._note_mask(handle, active_ranks, dropped)
        recv_x = outputs[0] if outputs[0] is not None else _lent(loan, x, (native.received, hidden))
        return recv_x, outputs[1], handle

    def low_latency_combine(self, expert_out, handle, out=None):
        """DeepEP's low_latency_combine: [tokens, hidden], per token the sum over its experts of
        its topk weight (the dispatch's) times the expert's row of expert_out ([received,
        hidden], recv_x's order and dtype). Bitwise deterministic; once per dispatch. As for
        combine, expert_out made by `empty` is read where it lies, and the result goes into
        `out` when given (written where it lies when `empty` made it).
        """
        if not isinstance(handle, DispatchHandle):
            raise ValueError(f"handle is a {type(handle).__name__}: pass what "
                             f"low_latency_dispatch returned")
        native = handle._checked(self)
        _kind(expert_out, "expert_out")
        rows, hidden = _shape2(expert_out, "expert_out")
        if (rows, hidden) != (native.received, native.hidden) or _word(
                expert_out, "expert_out") != native.dtype:
            raise ValueError(f"expert_out is {(rows, hidden)} {_dtype_name(expert_out)}: its "
                             f"dispatch delivered {(native.received, native.hidden)} "
                             f"{native.dtype} (one row per received token)")
        data = _contiguous(expert_out.detach() if _is_torch(expert_out) else expert_out)
        shape = (native.tokens, hidden)
        if out is None:
            return _lent(self._s().low_latency_combine(native, _address(data), 0), expert_out,
                         shape)
        out = _out(out, shape, expert_out, "low_latency_combine")
        self._s().low_latency_combine(native, _address(data), _address(out))
        return out

    # -- fused ops ---------------------------------------------------------------------------

    def _operands(self, a, b, what):
        _kind(a, f"{what}'s a")
        _kind(b, f"{what}'s b")
        word = _word(a, f"{what}'s a")
        (m, k), (k2, n) = _shape2(a, f"{what}'s a"), _shape2(b, f"{what}'s b")
        if k2 != k or _dtype_name(b) != _dtype_name(a):
            raise ValueError(f"{what}: a is {(m, k)} {_dtype_name(a)}, b is {(k2, n)} "
                             f"{_dtype_name(b)}; b must be ({k}, n) of a's dtype")
        return _contiguous(a), _contiguous(b), m, n, k, word

    # mode: "fused" (the pipeline), "sequential" (the GEMM, then the collective), or "auto" (the
    # first call of a shape runs both a few times; the faster one serves every later call).

    def gemm_all_reduce(self, a, b, mode="fused"):
        """The sum over PEs of a @ b (a [m, k] and b [k, n] this PE's): a row-parallel linear."""
        a, b, m, n, k, word = self._operands(a, b, "gemm_all_reduce")
        c = _new_as(a, (m, n))
        self._s().gemm_all_reduce(_address(a), _address(b), _address(c), m, n, k, word, mode)
        return c

    def matmul_reduce_scatter(self, a, b, mode="fused"):
        """This PE's rows of the sum over PEs of a @ b: from rank * ceil(m / W), as many."""
        a, b, m, n, k, word = self._operands(a, b, "matmul_reduce_scatter")
        c = _new_as(a, (-(-m // self.world_size), n))
        rows = self._s().matmul_reduce_scatter(_address(a), _address(b), _address(c), m, n, k,
                                               word, mode)
        return c[:rows]

    def all_gather_matmul(self, a, b, mode="fused"):
        """(AllGather(a) @ b, AllGather(a)): every PE passes a [rows, k] of the same rows."""
        a, b, rows, n, k, word = self._operands(a, b, "all_gather_matmul")
        c = _new_as(a, (rows * self.world_size, n))
        gathered = _new_as(a, (rows * self.world_size, k))
        self._s().all_gather_matmul(_address(a), _address(b), _address(c), _address(gathered),
                                    rows, n, k, word, mode)
        return c, gathered


_LEAST_ATTACH_TIMEOUT_S, _MOST_ATTACH_TIMEOUT_S = 0.001, 3600.0  # whole milliseconds


def attach(socket=None, local_rank=None, timeout=30.0):
    """Attaches to this node's daemon as one of its PEs.

    With no socket and rank, as `symmesh launch` says (SYMMESH_ATTACH_SOCKET,
    SYMMESH_LOCAL_RANK); otherwise to the attach socket `socket` as `local_rank`. Either way
    within `timeout` seconds.
    """
    try:
        seconds = float(timeout)
    except (TypeError, ValueError):
        seconds = math.nan
    in_range = _LEAST_ATTACH_TIMEOUT_S <= seconds <= _MOST_ATTACH_TIMEOUT_S
    if isinstance(timeout, bool) or not in_range:
        raise ValueError(f"attach: timeout {timeout!r}: allowed {_LEAST_ATTACH_TIMEOUT_S} to "
                         f"{_MOST_ATTACH_TIMEOUT_S:g} seconds")
    if socket is None and local_rank is None:
        return Session(_symmesh.Session.attach_from_environment(seconds))
    if socket is None or local_rank is None:
        raise ValueError("attach: pass both socket and local_rank, or neither")
    return Session(_symmesh.Session.attach(str(socket), int(local_rank), seconds))
