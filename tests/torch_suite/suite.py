"""torch's own distributed test class (DistributedTest._DistTestBase, which torch's
test_distributed_spawn.py runs for gloo) on the backend named by BACKEND: gloo, or symmesh,
registered as a third-party backend ("plugin"). Set WORLD_SIZE and TEMP_DIR as that file does;
for symmesh also SYMMESH_DAEMON and SYMMESH_SECRET_FILE of a cluster of WORLD_SIZE PEs.

    suite.py --list                  the CPU tests: every test not named for CUDA, NCCL or GPUs
    suite.py --out FILE [NAME ...]   runs them (default: all of --list), one JSON line per test
                                     in FILE: {"test": NAME, "outcome": pass|fail|error|skip,
                                     "detail": the skip's reason or the failure's last line}

tests/torch_suite/run.sh runs it and compares the outcomes with gloo's."""

import argparse
import json
import os
import re
import sys
import time
import unittest

import torch
import torch.distributed as dist

# The suite decides at import which tests a backend gets from the BACKEND it reads, and gives a
# third-party backend only those every backend takes. symmesh is to do all that gloo does, so it
# gets gloo's tests: the suite is imported as for gloo (BACKEND=gloo, SUITE_BACKEND=symmesh,
# which the test processes inherit), and its processes then initialise symmesh.
SUITE_BACKEND = os.environ.setdefault("SUITE_BACKEND", os.environ.get("BACKEND", ""))
if SUITE_BACKEND == "symmesh":
    import symmesh.distributed  # noqa: F401: registers the backend, in every test process

    os.environ["BACKEND"] = "gloo"

from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402
from torch.testing._internal.distributed import distributed_test  # noqa: E402

if SUITE_BACKEND == "symmesh":
    DistTestCases.backend_feature["plugin"].add("symmesh")
    distributed_test.BACKEND = "symmesh"

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


# Each test's processes start fresh, as spawned ones do, but are forked from a server that has
# imported torch, the suite and the backend once: a spawned process imports them again, about 5 s
# of a test's 6 on 2 cores. (The server cannot preload "__main__" itself: Python 3.11 drops its
# path.) Each process then runs this file as its __main__, as a spawned one does.
_FORKSERVER = torch.multiprocessing.get_context("forkserver")
_FORKSERVER.set_forkserver_preload(
    ["torch", "torch.distributed", "torch.testing._internal.distributed.distributed_test"]
    + (["symmesh.distributed"] if SUITE_BACKEND == "symmesh" else []))


class _FreshProcess(_FORKSERVER.Process):
    """Runs with its parent's environment as it is at the start, as a spawned process does: the
    suite sets TEMP_DIR and INIT_METHOD for each test, after the server started."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._environ = dict(os.environ)

    def run(self):
        os.environ.clear()
        os.environ.update(self._environ)
        super().run()


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._start_processes(_FreshProcess)
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


_NOT_CPU = re.compile("cuda|nccl|gpu", re.IGNORECASE)


def cpu_tests():
    names = unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn)
    return [n for n in names if not _NOT_CPU.search(n)]


class _Outcomes(unittest.TextTestResult):
    """Writes each test's outcome as a JSON line as it ends."""

    def __init__(self, out, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._out = out
        self._started = 0.0

    def startTest(self, test):  # noqa: N802: unittest's name
        self._started = time.monotonic()
        super().startTest(test)

    def _write(self, test, outcome, detail=""):
        record = {"test": test._testMethodName, "outcome": outcome, "detail": detail,
                  "seconds": round(time.monotonic() - self._started, 2)}
        self._out.write(json.dumps(record) + "\n")
        self._out.flush()

    def addSuccess(self, test):  # noqa: N802
        super().addSuccess(test)
        self._write(test, "pass")

    def addSkip(self, test, reason):  # noqa: N802
        super().addSkip(test, reason)
        self._write(test, "skip", reason)

    def addFailure(self, test, err):  # noqa: N802
        super().addFailure(test, err)
        self._write(test, "fail", _last_line(self.failures[-1][1]))

    def addError(self, test, err):  # noqa: N802
        super().addError(test, err)
        self._write(test, "error", _last_line(self.errors[-1][1]))

    def addExpectedFailure(self, test, err):  # noqa: N802
        super().addExpectedFailure(test, err)
        self._write(test, "pass", "expected failure")


def _last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--out")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    if args.list:
        print("\n".join(cpu_tests()))
        return 0
    names = args.names or cpu_tests()
    suite = unittest.TestSuite(TestDistBackendWithSpawn(name) for name in names)
    with open(args.out, "a") as out:
        runner = unittest.TextTestRunner(
            verbosity=2, resultclass=lambda *a, **k: _Outcomes(out, *a, **k))
        result = runner.run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    assert dist.is_available()
    sys.exit(main())
