"""A stand-in for the expecttest package, which Debian does not ship and torch's test helpers
import: only what torch.testing._internal.common_utils reads (ACCEPT and TestCase). No test of
the distributed suite compares against an expected-output string, so nothing here accepts one."""

import unittest

ACCEPT = False


class TestCase(unittest.TestCase):
    longMessage = True

    def assertExpectedInline(self, actual, expect, skip=0):  # noqa: N802: expecttest's name
        self.assertEqual(actual, expect)
