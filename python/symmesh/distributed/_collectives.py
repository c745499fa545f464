"""The collectives of one group, on symmesh.

The world group (every PE, in rank order) runs all_reduce (float32, bfloat16, float16 with SUM,
MIN, MAX, AVG), broadcast, all_gather, reduce_scatter and equal-split all_to_all as symmesh's
own collectives, through heap buffers every PE holds alike (PE.bounce); all_reduce and
broadcast use a tensor on the heap where it lies. The rest, and every
collective of a subgroup, are messages between the members (the point-to-point mailbox), on the
group's collective channel with the call's number as the tag:
  broadcast (of a subgroup), scatter: the root sends each member its part (a multicast for
    broadcast);
  gather, reduce: every member sends the root its tensor; the root reduces in rank order;
  all_gather: every member multicasts its tensor to the others;
  all_to_all, reduce_scatter: member i sends member j its j-th part; a reduce_scatter's member
    reduces what it received in rank order;
  all_reduce of the gathered kinds (_reductions.py): all_gather, then each member reduces in rank
    order (the same bits on every member);
  barrier: an all_gather of nothing;
  monitored_barrier: gloo's, on a channel of its own.
"""

import time
import zlib

import torch

from . import _reductions, _tensors


class Group:
    def __init__(self, pe, ranks, name, timeout_s):
        self.pe = pe  # the process's Attached
        self.ranks = list(ranks)  # global ranks in group order
        self.size = len(self.ranks)
        self.me = self.ranks.index(pe.rank)
        self.name = name
        self.timeout_s = timeout_s
        self.world = self.ranks == list(range(pe.world_size))
        digest = zlib.crc32(f"{name}|{','.join(map(str, self.ranks))}".encode())
        self.p2p_channel = 4 * digest  # the users' send and recv
        self.channel = 4 * digest + 1  # the collectives' messages
        self.monitor_channel = 4 * digest + 2  # monitored_barrier's, apart: a rank may miss one
        self._monitored = 0
        if pe.channels.get(self.channel, name) != name:
            raise RuntimeError(f"group {name!r}'s message channel is group "
                               f"{pe.channels[self.channel]!r}'s: give it another name")
        pe.channels[self.channel] = name
        self._calls = 0

    def global_rank(self, group_rank, what):
        if not 0 <= group_rank < self.size:
            raise ValueError(f"{what}: rank {group_rank} is outside the group's 0.."
                             f"{self.size - 1}")
        return self.ranks[group_rank]

    def _tag(self):
        self._calls += 1
        return self._calls

    def _wait(self, ops, what, timeout_s=None):
        seconds = timeout_s if timeout_s is not None else self.timeout_s
        self.pe.mailbox.wait(ops, time.monotonic() + seconds,
                             lambda: f"{what} on group {self.name!r} (rank {self.me} of "
                                     f"{self.size})")

    # -- messages between members -------------------------------------------------------------

    def _send(self, members, tag, tensor, what):
        return self.pe.mailbox.send([self.ranks[m] for m in members], self.channel, tag,
                                    tensor.data_ptr(), _tensors.nbytes(tensor), what=what)

    def _recv(self, member, tag, tensor, what):
        return self.pe.mailbox.recv(self.ranks[member], self.channel, tag, tensor.data_ptr(),
                                    _tensors.nbytes(tensor), what=what)

    def _on_heap(self, data):
        """Whether data lies on this PE's symmetric heap (symmesh.distributed.session().empty
        made it): the world's collectives then use it where it lies, copying nothing. Every
        rank passes such a tensor, or none does (the daemon refuses calls that differ)."""
        return self.pe.native.on_heap(data.data_ptr(), _tensors.nbytes(data))

    def _others(self):
        return [m for m in range(self.size) if m != self.me]

    # -- the collectives ----------------------------------------------------------------------

    def barrier(self, timeout_s=None):
        """Messages between the members (not symmesh's barrier, which waits the daemon's
        --wait-timeout and ends the session when it passes): the group's timeout applies, and
        a rank that times out leaves the others' session as it was, as gloo's barrier does."""
        empty = torch.empty(0, dtype=torch.uint8)
        self.all_gather_list(empty, "barrier", timeout_s, messages_only=True)

    def monitored_barrier(self, timeout_s, wait_all_ranks):
        """gloo's monitored barrier: every member tells member 0 it arrived, and member 0, once
        it heard from all (in rank order, within timeout_s), tells them to go on; member 0
        names the first rank that did not come (every one with wait_all_ranks)."""
        self._monitored += 1
        tag, empty = self._monitored, torch.empty(0, dtype=torch.uint8)
        ms = int(timeout_s * 1000)
        mailbox, deadline = self.pe.mailbox, time.monotonic() + timeout_s
        if self.me != 0:
            mailbox.send([self.ranks[0]], self.monitor_channel, tag, empty.data_ptr(), 0)
            go = mailbox.recv(self.ranks[0], self.monitor_channel, tag, empty.data_ptr(), 0)
            try:
                mailbox.wait([go], deadline, lambda: "monitored_barrier")
            except TimeoutError as e:
                raise RuntimeError(
                    f"Rank {self.me} successfully reached monitoredBarrier, but received errors "
                    f"while waiting for send/recv from rank 0. Please check rank 0 logs for "
                    f"faulty rank. ({e})") from None
            return
        failed = []
        for m in self._others():
            if time.monotonic() >= deadline and not failed:
                raise RuntimeError(f"Rank 0 timed out in monitoredBarrier after {ms} ms")
            came = mailbox.recv(self.ranks[m], self.monitor_channel, tag, empty.data_ptr(), 0)
            try:
                mailbox.wait([came], deadline, lambda: "monitored_barrier")
            except TimeoutError:
                if not wait_all_ranks:
                    raise RuntimeError(f"Rank {m} failed to pass monitoredBarrier in {ms} ms") \
                        from None
                failed.append(m)
        if failed:
            raise RuntimeError(f"Ranks {', '.join(map(str, failed))} failed to pass "
                               f"monitoredBarrier in {ms} ms")
        for m in self._others():
            mailbox.send([self.ranks[m]], self.monitor_channel, tag, empty.data_ptr(), 0)

    def all_gather_list(self, data, what="all_gather", timeout_s=None, messages_only=False,
                        shapes=None):
        """Every member's `data` (contiguous, the same shape everywhere unless `shapes` gives
        each member's), in rank order."""
        if self.world and data.numel() and not messages_only and shapes is None:
            return self._native_all_gather(data)
        tag = self._tag()
        out = [data if m == self.me else
               torch.empty(shapes[m] if shapes else data.shape, dtype=data.dtype)
               for m in range(self.size)]
        ops = [self._recv(m, tag, out[m], what) for m in self._others()]
        if self.size > 1:
            ops.append(self._send(self._others(), tag, data, what))
        self._wait(ops, what, timeout_s)
        return out

    def _native_all_gather(self, data):
        pe, size = self.pe, _tensors.nbytes(data)
        word, element, padded = _tensors.unit(size)
        source = pe.bounce("in", padded)
        _tensors.copy_in(source, data)
        gathered = pe.bounce("out", padded * self.size)
        pe.native.all_gather(gathered, source, padded // element, word)
        out = []
        for m in range(self.size):
            piece = torch.empty_like(data)
            _tensors.copy_out(piece, gathered + m * padded)
            out.append(piece)
        return out

    def all_reduce(self, data, op):
        """data (contiguous) becomes the reduction over the group."""
        word = _reductions.native_word(op, data.dtype)
        if data.numel() == 0:
            return
        if self.world and word is not None:
            pe, size = self.pe, _tensors.nbytes(data)
            on_heap = self._on_heap(data)
            buffer = data.data_ptr() if on_heap else pe.bounce("in", size)
            if not on_heap:
                _tensors.copy_in(buffer, data)
            pe.native.all_reduce(buffer, buffer, data.numel(),
                                 _reductions.NATIVE_DTYPES[data.dtype], word)
            if not on_heap:
                _tensors.copy_out(data, buffer)
            if _reductions.is_average(op):
                data.div_(self.size)
            return
        result = _reductions.combine(op, self.all_gather_list(data, "all_reduce"), self.size)
        data.copy_(result)

    def broadcast(self, data, root, what="broadcast"):
        if self.world and data.numel():
            pe, size = self.pe, _tensors.nbytes(data)
            on_heap = self._on_heap(data)
            buffer = data.data_ptr() if on_heap else pe.bounce("in", size)
            if self.me == root and not on_heap:
                _tensors.copy_in(buffer, data)
            pe.native.broadcast(buffer, buffer, size, root)
            if self.me != root and not on_heap:
                _tensors.copy_out(data, buffer)
            return
        tag = self._tag()
        if self.me == root:
            if self.size > 1:
                self._wait([self._send(self._others(), tag, data, what)], what)
        else:
            self._wait([self._recv(root, tag, data, what)], what)

    def reduce(self, data, op, root):
        _reductions.checked(op, data.dtype)
        if self.world and _reductions.native_word(op, data.dtype) is not None:
            result = data.clone()
            self.all_reduce(result, op)
            if self.me == root:
                data.copy_(result)
            return
        gathered = self.gather(data, root, "reduce")
        if self.me == root:
            data.copy_(_reductions.combine(op, gathered, self.size))

    def gather(self, data, root, what="gather"):
        """On the root, every member's data in rank order; elsewhere None."""
        tag = self._tag()
        if self.me != root:
            self._wait([self._send([root], tag, data, what)], what)
            return None
        out = [data if m == root else torch.empty_like(data) for m in range(self.size)]
        self._wait([self._recv(m, tag, out[m], what) for m in self._others()], what)
        return out

    def scatter(self, data, parts, root):
        """data (contiguous) becomes the root's parts[this member]."""
        tag = self._tag()
        if self.me != root:
            self._wait([self._recv(root, tag, data, "scatter")], "scatter")
            return
        ops = [self._send([m], tag, _tensors.dense(parts[m]), "scatter") for m in self._others()]
        self._wait(ops, "scatter")
        data.copy_(parts[root])

    def all_to_all(self, outs, ins, what="all_to_all", equal=False):
        """outs[j] (contiguous) receives member j's ins[this member]. `equal`: every member's
        parts have one size (the caller's contract, as all_to_all_single without splits), so
        the world may take symmesh's all_to_all."""
        if self.world and equal and _tensors.nbytes(outs[0]):
            self._native_all_to_all(outs, ins)
            return
        tag = self._tag()
        ops = [self._recv(m, tag, outs[m], what) for m in self._others()]
        ops += [self._send([m], tag, _tensors.dense(ins[m]), what) for m in self._others()]
        self._wait(ops, what)
        outs[self.me].copy_(ins[self.me])

    def _native_all_to_all(self, outs, ins):
        pe, size = self.pe, _tensors.nbytes(outs[0])
        word, element, padded = _tensors.unit(size)
        source = pe.bounce("in", padded * self.size)
        for m, part in enumerate(ins):
            _tensors.copy_in(source + m * padded, _tensors.dense(part))
        target = pe.bounce("out", padded * self.size)
        pe.native.all_to_all(target, source, padded // element, word)
        for m, part in enumerate(outs):
            _tensors.copy_out(part, target + m * padded)

    def reduce_scatter(self, data, parts, op):
        """data (contiguous) becomes the reduction over members of their parts[this member]."""
        word = _reductions.native_word(op, data.dtype)
        if any(p.numel() != data.numel() or p.dtype != data.dtype for p in parts):
            raise ValueError("reduce_scatter: every input part must have the output's size and "
                             f"dtype ({data.numel()} {data.dtype})")
        if self.world and word is not None and data.numel():
            pe, size = self.pe, _tensors.nbytes(data)
            source = pe.bounce("in", size * self.size)
            for m, part in enumerate(parts):
                _tensors.copy_in(source + m * size, _tensors.dense(part))
            target = pe.bounce("out", size)
            pe.native.reduce_scatter(target, source, data.numel() * self.size,
                                     _reductions.NATIVE_DTYPES[data.dtype], word)
            _tensors.copy_out(data, target)
            if _reductions.is_average(op):
                data.div_(self.size)
            return
        received = [torch.empty_like(data) for _ in range(self.size)]
        self.all_to_all(received, list(parts), "reduce_scatter")
        data.copy_(_reductions.combine(op, received, self.size))
