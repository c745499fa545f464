"""torch.distributed's Work for symmesh's calls.

A collective runs in the caller's thread, so its Work is done when it is returned (with
async_op=True as without): done() makes it a Work of torch's own over a completed future, which
torch's C++ (DDP's reducer, its parameter checks) can wait on too. A point-to-point receive, and
a send whose chunks did not all fit yet, are this module's Work: they move on whenever this
process waits for one of them (wait(), is_completed() and get_future() drive every pending
message of the process, not just their own). Only Python calls those (torch's C++ makes no
point-to-point calls).
"""

import datetime
import time

import torch
import torch.distributed as dist
from torch.futures import Future


def done(result):
    """The Work of a call that is over: `result` is what its future carries."""
    future = Future()
    future.set_result(result)
    return torch._C._distributed_c10d._create_work_from_future(future)


class Work(dist._Work if hasattr(dist, "_Work") else torch._C._distributed_c10d.Work):
    def __init__(self, result, mailbox=None, ops=(), timeout_s=None, describe=None,
                 source=None):
        super().__init__()
        self._result = result  # the tensors the call filled (what get_future() carries)
        self._mailbox, self._ops = mailbox, list(ops)
        self._timeout_s, self._describe = timeout_s, describe
        self._source = source  # () -> the rank a receive from any source took its message from
        self._error = None
        self._finish = None  # () -> None: copies a received message out, once it is done
        self._finished = not self._ops

    def on_done(self, finish):
        self._finish = finish
        return self

    def _complete(self):
        if self._finish is not None:
            finish, self._finish = self._finish, None
            finish()
        self._finished = True

    def is_completed(self):
        if self._finished or self._error is not None:
            return True
        self._mailbox.progress()
        if all(op.done for op in self._ops):
            try:
                self.wait()
            except Exception:  # noqa: BLE001: kept for wait() and exception() to raise
                pass
            return True
        return False

    def is_success(self):
        return self.is_completed() and self._error is None

    def exception(self):
        return self._error

    def wait(self, timeout=datetime.timedelta(0)):
        if self._error is not None:
            raise self._error
        if self._finished:
            return True
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else 0
        limit = seconds if seconds > 0 else self._timeout_s
        try:
            self._mailbox.wait(self._ops, time.monotonic() + limit, self._describe)
            self._complete()
        except Exception as e:
            self._error = e
            raise
        return True

    def result(self):
        return self._result

    def get_future(self):
        future = Future()
        try:
            self.wait()
            future.set_result(self._result)
        except Exception as e:  # noqa: BLE001: the future carries it
            future.set_exception(e)
        return future

    def _source_rank(self):
        self.wait()
        return self._source()

    def source_rank(self):
        return self._source_rank()
