"""Each test's time, for the suite's table (``benchmarks/suite_times.py``, docs/testing.md).

With ``ESTIMATOR_DIST_TEST_TIMES=FILE`` in the environment, every test appends one JSON
line to FILE: its node id, the worker that ran it, its start (seconds since the epoch),
its wall time and the CPU time it used (this process's, and that of the processes it
started and waited for), set-up and tear-down included. ``.ci/run`` sets it for both
TensorFlow ends.
"""
import json
import os
import resource
import time

import pytest

TIMES_VARIABLE = "ESTIMATOR_DIST_TEST_TIMES"


def _cpu_seconds():
    own, children = (resource.getrusage(who)
                     for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Times the test (set-up, call and tear-down) when ``TIMES_VARIABLE`` names a file."""
    del nextitem
    path = os.environ.get(TIMES_VARIABLE)
    start, wall, cpu = time.time(), time.monotonic(), _cpu_seconds()
    yield
    if path:
        line = {"test": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                "start": round(start, 3), "wall": round(time.monotonic() - wall, 3),
                "cpu": round(_cpu_seconds() - cpu, 3)}
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps(line) + "\n")
