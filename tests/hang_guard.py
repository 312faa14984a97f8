"""A hard end for a test that outlives its time limit where pytest-timeout cannot end it.

pytest-timeout (``timeout_method = thread``, pytest.ini) ends a test from a Python thread,
which needs the GIL: a process hung with the GIL held (a thread blocked inside the
interpreter, as ``sys._current_frames`` could on Python 3.11) never runs it, and the run
waited for ever. faulthandler's watchdog is a thread of C: a grace period after the test's
time limit it writes every thread's stack to the process's stderr (not pytest's capture of
it, lost as the process ends) and ends the process, so the run fails (pytest.ini replaces
no worker that died).
"""
import contextlib
import faulthandler
import os

import pytest

_STDERR = pytest.StashKey[int]()


def grace_seconds(limit):
    """How long past its time limit a test runs before its process ends."""
    return max(10.0, limit / 5)


def _time_limit(item):
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    return float(item.config.getini("timeout") or 0)


def pytest_configure(config):
    """Keeps a descriptor of the process's own stderr, from under pytest's capture."""
    capture = config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        config.stash[_STDERR] = os.dup(2)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Arms the watchdog for the test (set-up, call and tear-down), then disarms it."""
    del nextitem
    limit = _time_limit(item)
    if limit > 0:
        faulthandler.dump_traceback_later(limit + grace_seconds(limit), exit=True,
                                          file=item.config.stash[_STDERR])
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
