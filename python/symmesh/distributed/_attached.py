"""This process's PE for torch.distributed: attached once per init_process_group, shared by
every group made from it, detached by destroy_process_group.

A process `symmesh launch` started attaches as launch says (SYMMESH_ATTACH_SOCKET). Any other
(torchrun's, torch.multiprocessing.spawn's, one started by hand) finds its seat through the
daemon at SYMMESH_DAEMON with the secret in SYMMESH_SECRET_FILE: rank r is local rank r % R of
node r // R (node-major, as torchrun). Rank 0 starts the session job and tells the others
through torch's store that it did (or why it could not).
"""

import concurrent.futures
import os
import queue
import threading
import time

from .. import _symmesh
from . import _mailbox

# The point-to-point region's parts (env SYMMESH_P2P_ARENA_BYTES, SYMMESH_P2P_LANDING_BYTES):
# at most these, and at most an eighth and a thirty-second of the PE's heap.
_ARENA_BYTES = 8 << 20
_LANDING_BYTES = 2 << 20
_ATTACH_RETRY_S = 0.05  # a slot whose last process just detached is freed within moments


def _bytes_from_env(name, default):
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 1 << 16 <= value <= 1 << 34:
        raise ValueError(f"{name}={text!r}: allowed a byte count from 65536 to 2**34")
    return value


class Attached:
    def __init__(self, native, rank, world_size, timeout_s):
        self.native = native
        self.rank, self.world_size = rank, world_size
        self.timeout_s = timeout_s
        heap = native.heap_bytes
        arena = _bytes_from_env("SYMMESH_P2P_ARENA_BYTES",
                                max(min(_ARENA_BYTES, heap // 8), 1 << 16))
        landing = _bytes_from_env("SYMMESH_P2P_LANDING_BYTES",
                                  max(min(_LANDING_BYTES, heap // 32), 1 << 16))
        region = native.malloc(_mailbox.region_bytes(world_size, arena, landing))
        self.mailbox = _mailbox.Mailbox(native, region, world_size, rank, arena, landing)
        self.mailbox.clear()
        self._bounce = {}  # role -> (address, bytes): heap buffers of the world's collectives
        self.channels = {}  # channel -> group name: the groups' message channels in use
        self._session = None
        self._worker = _Worker()
        native.barrier()  # every PE's tables are clear before any message

    def session(self):
        """symmesh.Session over this PE (made once): its close() leaves the PE attached."""
        if self._session is None:
            from .. import Session

            self._session = Session(self.native)
        return self._session

    def submit(self, call):
        """Runs call() on the process's worker thread after every call handed to it before;
        returns its concurrent Future. The daemon matches every rank's calls in order, so every
        call of this PE goes through here or waits for what is here first (drain)."""
        return self._worker.submit(call)

    def drain(self):
        """Waits until every call handed to the worker has run (each reports its own error)."""
        self._worker.drain()

    def bounce(self, role, nbytes):
        """A heap buffer of at least `nbytes` for `role` ("in", "out"), the same on every PE:
        the world's collectives ask for the same sizes in the same order everywhere."""
        address, size = self._bounce.get(role, (0, 0))
        if size < nbytes:
            if address:
                self.native.free(address)
            size = max(nbytes, 2 * size, 4096)
            address = self.native.malloc(size)
            self._bounce[role] = (address, size)
        return address

    def close(self):
        """Detaches. Messages this PE sent and nobody took yet stay takeable: its heap lives as
        long as the session, which lasts while any PE is attached."""
        if self.native is None:
            return
        self.drain()
        self._worker.stop()
        if self._session is not None:
            self._session.close()
        native, self.native = self.native, None
        native.detach()  # the PE is free for the next process at once


class _Worker:
    """One thread that runs the calls handed to it in order: a collective returns at once (its
    Work waits), so the caller computes while the daemon moves the data."""

    def __init__(self):
        self._calls = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread = None
        self._last = None

    def submit(self, call):
        future = concurrent.futures.Future()
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="symmesh-calls",
                                                daemon=True)
                self._thread.start()
            self._calls.put((call, future))
            self._last = future
        return future

    def drain(self):
        last = self._last
        if last is not None:
            concurrent.futures.wait([last])

    def stop(self):
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._calls.put((None, None))
        if thread is not None:
            thread.join()

    def _run(self):
        while True:
            call, future = self._calls.get()
            if call is None:
                return
            try:
                future.set_result(call())
            except BaseException as e:  # noqa: BLE001: the Future carries it to the waiter
                future.set_exception(e)


def _attach_seat(socket, local_rank, timeout_s):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return _symmesh.Session.attach(socket, local_rank, max(deadline - time.monotonic(), 1))
        except ValueError as e:
            # The process before this one on the slot is still being let go.
            if "is held by pid" not in str(e) or time.monotonic() >= deadline:
                raise
        time.sleep(_ATTACH_RETRY_S)


def attach(rank, world_size, store, generation, timeout_s):
    """The native session of torch rank `rank`, attached within `timeout_s`."""
    if os.environ.get("SYMMESH_ATTACH_SOCKET"):
        native = _symmesh.Session.attach_from_environment(timeout_s)
        if (native.rank, native.world_size) != (rank, world_size):
            raise ValueError(
                f"init_process_group(rank={rank}, world_size={world_size}) in a process symmesh "
                f"launch started as PE {native.rank} of {native.world_size}: allowed the rank "
                f"and world size launch set (SYMMESH_RANK, SYMMESH_WORLD_SIZE)")
        return native
    daemon = os.environ.get("SYMMESH_DAEMON", "127.0.0.1:7400")
    secret = os.environ.get("SYMMESH_SECRET_FILE", "")
    socket, local_rank, _, _, _ = _symmesh.find_seat(daemon, secret, rank, world_size, timeout_s)
    key = f"symmesh/session/{generation}"
    if rank == 0:
        try:
            attach_wait = int(min(max(timeout_s, 60), 3600))
            job = _symmesh.start_session(daemon, secret, attach_wait, timeout_s)
        except Exception as e:
            store.set(key, f"error: {e}")
            raise
        store.set(key, str(job))
    else:
        said = store.get(key).decode()
        if said.startswith("error: "):
            raise RuntimeError(f"rank 0 could not start the symmesh session: {said[7:]}")
    native = _attach_seat(socket, local_rank, timeout_s)
    if (native.rank, native.world_size) != (rank, world_size):
        seated_as = native.rank
        native.detach()
        raise RuntimeError(f"rank {rank} attached at {socket} as local rank {local_rank}, which "
                           f"that daemon seats as PE {seated_as}: a daemon of another node "
                           f"answers at that path on this host; start rank {rank} on its node")
    return native
