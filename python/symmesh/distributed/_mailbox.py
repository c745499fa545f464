"""Point-to-point messages between attached processes, over symmesh's one-sided calls.

Every PE holds one region on its symmetric heap, made at the same offset everywhere:

    inbox   [W sources][K slots][8 words]   descriptors other PEs put here
    outbox  [W targets][K slots][8 words]   where this PE writes a descriptor before putting it
    done    [W targets][K slots]            set by a receiver once it took a chunk
    arena   A bytes                         payloads of sends, until their receivers take them
    landing L bytes                         where a receiver's gets land when its tensor is not
                                            on the heap

A send copies its payload into the arena (in chunks of at most `chunk` bytes) and puts one
descriptor per chunk into the receiver's inbox with a put_signal: the slot's first word, set
last, is the chunk's sequence number. The receiver matches descriptors to its posted receives
(by channel, tag and source, in order), takes each chunk with a get that then sets the sender's
done word, and copies it out. Neither side's call waits for the other's process: a send whose
chunks do not fit yet, and a receive whose message has not come, stay pending and move on
whenever this process waits for anything (Mailbox.wait). A slot is reused once its chunk was
taken, so at most K chunks per pair are in flight.

Cost: a send is one copy in and one put_signal of 56 bytes per chunk; a receive is one get per
chunk (and one copy out unless its tensor is on the heap).
"""

import ctypes
import time

import numpy

SLOTS = 64
WORDS = 8  # per descriptor: seq, channel, tag, message, total, offset, length, arena offset
_SEQ, _CHANNEL, _TAG, _MESSAGE, _TOTAL, _OFFSET, _LENGTH, _ARENA = range(WORDS)
_ALIGN = 64
_MASK = (1 << 64) - 1  # heap addresses travel as offsets from the region, modulo 2**64


def region_bytes(world_size, arena_bytes, landing_bytes):
    table = world_size * SLOTS * WORDS * 8
    return 2 * table + world_size * SLOTS * 8 + arena_bytes + landing_bytes


class _Arena:
    """First-fit extents of the arena: (offset, bytes) free, kept sorted and merged."""

    def __init__(self, size):
        self._free = [(0, size)]

    def take(self, nbytes):
        nbytes = (max(nbytes, 1) + _ALIGN - 1) // _ALIGN * _ALIGN
        for i, (at, size) in enumerate(self._free):
            if size >= nbytes:
                if size == nbytes:
                    del self._free[i]
                else:
                    self._free[i] = (at + nbytes, size - nbytes)
                return at, nbytes
        return None

    def give(self, extent):
        self._free.append(extent)
        self._free.sort()
        merged = []
        for at, size in self._free:
            if merged and merged[-1][0] + merged[-1][1] == at:
                merged[-1] = (merged[-1][0], merged[-1][1] + size)
            else:
                merged.append((at, size))
        self._free = merged


class Send:
    """One message to one or more PEs (those of a multicast share its payload's chunks)."""

    def __init__(self, targets, channel, tag, address, nbytes, on_heap, what):
        self.targets = list(targets)
        self.channel, self.tag = channel, tag
        self.address, self.nbytes = address, nbytes
        self.on_heap = on_heap  # the payload stays where it is, on the heap, until taken
        self.what = what
        self.posted = 0  # bytes posted
        self.message = None  # the message number per target, once its first chunk goes
        self.chunks = []  # (arena extent or None, [(target, seq)]) not yet known taken
        self.error = None

    def waiting_for(self):
        tags = f"tag {self.tag}"
        return f"rank{'s' if len(self.targets) > 1 else ''} " + ", ".join(
            map(str, self.targets)) + f" to take a message ({tags})"

    @property
    def done(self):
        if self.error is not None:
            return True
        started = self.posted == self.nbytes and self.message is not None
        # A copied payload is the arena's once posted; one left on the heap is the caller's
        # again only once every receiver took it.
        return started and (not self.on_heap or not self.chunks)


class Recv:
    """One message from a PE (or from any: source None) into `nbytes` at `address`."""

    def __init__(self, source, channel, tag, address, nbytes, on_heap, what):
        self.source, self.channel, self.tag = source, channel, tag
        self.address, self.nbytes, self.on_heap = address, nbytes, on_heap
        self.what = what
        self.matched = None  # (source, message) once its first chunk arrived
        self.received = 0
        self.error = None

    def waiting_for(self):
        source = "any rank" if self.source is None else f"rank {self.source}"
        return f"a message from {source} (tag {self.tag})"

    @property
    def done(self):
        return self.error is not None or (self.matched is not None and
                                          self.received == self.nbytes)


class Mailbox:
    def __init__(self, native, base, world_size, rank, arena_bytes, landing_bytes):
        self._s = native
        self._w, self._me = world_size, rank
        table = world_size * SLOTS * WORDS * 8
        self._inbox_at, self._outbox_at = base, base + table
        self._done_at = base + 2 * table
        self._arena_at = self._done_at + world_size * SLOTS * 8
        self._landing_at = self._arena_at + arena_bytes
        self._landing_bytes = landing_bytes
        self.chunk = min(max(arena_bytes // 4, _ALIGN), landing_bytes)
        size = region_bytes(world_size, arena_bytes, landing_bytes)
        words = numpy.frombuffer(native.heap_view(base, size), dtype=numpy.uint64,
                                 count=(2 * table + world_size * SLOTS * 8) // 8)
        self._inbox = words[:table // 8].reshape(world_size, SLOTS, WORDS)
        self._outbox = words[table // 8:2 * table // 8].reshape(world_size, SLOTS, WORDS)
        self._done = words[2 * table // 8:].reshape(world_size, SLOTS)
        self._arena = _Arena(arena_bytes)
        self._next_in = [1] * world_size  # the next sequence number expected from each PE
        self._next_out = [1] * world_size  # the next this PE sends to each
        self._message_out = [0] * world_size
        self._arrived = [[] for _ in range(world_size)]  # descriptors not yet taken, per source
        self._sends = []  # not yet wholly posted, in order
        self._posted = []  # wholly posted, some chunk not yet known taken
        self._recvs = []

    def clear(self):
        """Zeroes the descriptor tables (before any PE uses them: a barrier follows)."""
        self._inbox[...] = 0
        self._outbox[...] = 0
        self._done[...] = 0

    # -- posting -----------------------------------------------------------------------------

    def send(self, targets, channel, tag, address, nbytes, on_heap=False, what="send"):
        op = Send(targets, channel, tag, address, nbytes, on_heap, what)
        self._sends.append(op)
        self.progress()
        return op

    def recv(self, source, channel, tag, address, nbytes, on_heap=False, what="recv"):
        op = Recv(source, channel, tag, address, nbytes, on_heap, what)
        self._recvs.append(op)
        self.progress()
        return op

    # -- progress ----------------------------------------------------------------------------

    def progress(self):
        self._absorb()
        self._take()
        self._reclaim()
        self._post()

    def _slot_free(self, target, seq):
        return seq <= SLOTS or int(self._done[target, (seq - 1) % SLOTS]) >= seq - SLOTS

    def _post(self):
        while self._sends:
            op = self._sends[0]
            if op.error is None and not self._post_chunks(op):
                return  # later sends wait behind it: a PE's messages leave in order
            self._sends.pop(0)
            if op.chunks:
                self._posted.append(op)

    def _post_chunks(self, op):
        """Posts what fits of `op`; True once all of it is posted."""
        while op.posted < op.nbytes or op.message is None:
            length = min(self.chunk, op.nbytes - op.posted)
            if not all(self._slot_free(t, self._next_out[t]) for t in op.targets):
                return False
            # An empty message names the arena: its address must lie on the heap all the same.
            extent, source = None, (op.address + op.posted) if length else self._arena_at
            if length and not op.on_heap:
                extent = self._arena.take(length)
                if extent is None:
                    return False
                ctypes.memmove(self._arena_at + extent[0], source, length)
                source = self._arena_at + extent[0]
            if op.message is None:
                op.message = {}
                for t in op.targets:
                    self._message_out[t] += 1
                    op.message[t] = self._message_out[t]
            sent = []
            for t in op.targets:
                seq = self._next_out[t]
                self._next_out[t] += 1
                slot = (seq - 1) % SLOTS
                row = self._outbox[t, slot]
                row[_CHANNEL], row[_TAG], row[_MESSAGE] = op.channel, op.tag, op.message[t]
                row[_TOTAL], row[_OFFSET], row[_LENGTH] = op.nbytes, op.posted, length
                row[_ARENA] = (source - self._inbox_at) & _MASK
                entry = (self._me * SLOTS + slot) * WORDS * 8
                out = (t * SLOTS + slot) * WORDS * 8
                self._s.put_signal(self._inbox_at + entry + 8, self._outbox_at + out + 8,
                                   (WORDS - 1) * 8, self._inbox_at + entry, seq, t)
                sent.append((t, seq))
            op.chunks.append((extent, sent))
            op.posted += length
            if length == 0:
                break
        return True

    def _taken(self, sent):
        return all(int(self._done[t, (seq - 1) % SLOTS]) >= seq for t, seq in sent)

    def _reclaim(self):
        for op in self._sends + self._posted:
            kept = []
            for extent, sent in op.chunks:
                if not self._taken(sent):
                    kept.append((extent, sent))
                elif extent is not None:
                    self._arena.give(extent)
            op.chunks = kept
        self._posted = [op for op in self._posted if op.chunks]

    def _absorb(self):
        for source in range(self._w):
            while True:
                seq = self._next_in[source]
                row = self._inbox[source, (seq - 1) % SLOTS]
                if int(row[_SEQ]) != seq:
                    break
                self._arrived[source].append((seq,) + tuple(int(v) for v in row[1:]))
                self._next_in[source] = seq + 1

    def _take(self):
        for op in self._recvs:
            if op.matched is None and not self._match(op):
                continue
            self._pull(op)
        self._recvs = [op for op in self._recvs if not op.done]

    def _match(self, op):
        sources = range(self._w) if op.source is None else (op.source,)
        for source in sources:
            for d in self._arrived[source]:
                if d[_CHANNEL] == op.channel and d[_TAG] == op.tag and d[_OFFSET] == 0:
                    op.matched = (source, d[_MESSAGE])
                    if d[_TOTAL] != op.nbytes:
                        op.error = ValueError(
                            f"{op.what}: the message from rank {source} (tag {op.tag}) has "
                            f"{d[_TOTAL]} bytes; the receiving tensor has {op.nbytes}: allowed "
                            f"the same size on both sides")
                    return True
        return False

    def _pull(self, op):
        source, message = op.matched
        arrived = self._arrived[source]
        i = 0
        while i < len(arrived):
            d = arrived[i]
            if d[_MESSAGE] != message or d[_CHANNEL] != op.channel or d[_TAG] != op.tag:
                i += 1
                continue
            del arrived[i]
            seq, length, offset = d[_SEQ], d[_LENGTH], d[_OFFSET]
            slot = (seq - 1) % SLOTS
            done_word = self._done_at + (self._me * SLOTS + slot) * 8
            remote = (self._inbox_at + d[_ARENA]) & _MASK
            if op.error is not None or length == 0:
                self._s.get(self._landing_at, remote, 0, source, done_word, seq)
            elif op.on_heap:
                self._s.get(op.address + offset, remote, length, source, done_word, seq)
            else:
                for at in range(0, length, self._landing_bytes):
                    piece = min(self._landing_bytes, length - at)
                    last = at + piece == length
                    self._s.get(self._landing_at, remote + at, piece, source,
                                done_word if last else 0, seq if last else 0)
                    ctypes.memmove(op.address + offset + at, self._landing_at, piece)
            op.received += length

    # -- waiting -----------------------------------------------------------------------------

    def _watched(self):
        """(addresses, values) of every word whose change may let something move: the next
        descriptor's slot from each PE and the done word of each chunk not known taken. None
        when one of them changed already (since the last progress): no wait then."""
        words, seen = [], []
        for source in range(self._w):
            expected = self._next_in[source]
            slot = (expected - 1) % SLOTS
            value = int(self._inbox[source, slot, _SEQ])
            if value == expected:
                return None
            words.append(self._inbox_at + (source * SLOTS + slot) * WORDS * 8)
            seen.append(value)
        for op in self._sends + self._posted:
            for _, sent in op.chunks:
                for t, seq in sent:
                    slot = (seq - 1) % SLOTS
                    value = int(self._done[t, slot])
                    if value >= seq:
                        return None
                    words.append(self._done_at + (t * SLOTS + slot) * 8)
                    seen.append(value)
        return words, seen

    def wait(self, ops, deadline, describe):
        """Moves everything on until every op in `ops` is done, or raises TimeoutError at
        `deadline` (time.monotonic()) naming describe() and what it still waited for (those of
        them not yet under way are cancelled)."""
        seconds = deadline - time.monotonic()
        while True:
            self.progress()
            for op in ops:
                if op.error is not None:
                    raise op.error
            if all(op.done for op in ops):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                pending = [op for op in ops if not op.done]
                self.cancel(pending)
                raise TimeoutError(f"{describe()}: Timed out after {seconds:.3g} s waiting for "
                                   + "; ".join(op.waiting_for() for op in pending))
            watched = self._watched()
            if watched is not None:
                self._s.wait_for_word_change(*watched, min(left, 0.5))

    def cancel(self, ops):
        """Drops receives no message matched yet and sends no chunk of which left yet: a later
        message is not taken by a receive nobody waits for."""
        for op in ops:
            if isinstance(op, Recv) and op.matched is None and op in self._recvs:
                self._recvs.remove(op)
                op.error = TimeoutError(f"{op.what}: cancelled at its timeout")
            elif isinstance(op, Send) and op.message is None and op in self._sends:
                self._sends.remove(op)
                op.error = TimeoutError(f"{op.what}: cancelled at its timeout")
