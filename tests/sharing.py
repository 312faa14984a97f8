"""How tests share the machine when the suite runs on several workers (``pytest -n N``).

A test marked ``alone`` measures time (a hang within a margin, a watchdog's bound, a
soak's rates) or loads the machine so that another test's timing would suffer: it runs
with no other test beside it. Every other test may run beside any test not marked
``alone``. Two file locks shared by the workers of one run, in the run's base temporary
directory, make it so, around the whole of a test (its fixtures' set-up and tear-down
included, before its time limit starts):

- every test holds the ``tests`` lock, shared, while it runs; an ``alone`` test holds it
  exclusively, so it starts once the tests running beside it have ended;
- the ``turnstile`` lock makes a waiting ``alone`` test block new tests from starting
  (without it the other workers could hold the shared lock one test after another and
  never let it in).

Outside a run on workers (plain ``pytest``) nothing is locked.
"""
import contextlib
import fcntl
import os

import pytest

ALONE = "alone"
RUN_ID = "PYTEST_XDIST_TESTRUNUID"  # Set by pytest-xdist in each worker of a run.


def _lock_path(directory, name):
    return os.path.join(directory, f"estimator-dist-tests.{name}")


@contextlib.contextmanager
def _locked(path, mode):
    with open(path, "a") as file:
        fcntl.flock(file, mode)
        try:
            yield
        finally:
            fcntl.flock(file, fcntl.LOCK_UN)


@contextlib.contextmanager
def machine_share(alone, directory):
    """Holds the machine as a test ``alone`` (or not) needs it, in the run whose locks are
    in ``directory``."""
    turnstile, tests = _lock_path(directory, "turnstile"), _lock_path(directory, "tests")
    if alone:
        with _locked(turnstile, fcntl.LOCK_EX), _locked(tests, fcntl.LOCK_EX):
            yield
        return
    with _locked(turnstile, fcntl.LOCK_EX):
        pass  # An alone test waiting holds the turnstile: start after it.
    with _locked(tests, fcntl.LOCK_SH):
        yield


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    """Runs each test (set-up, call and tear-down) holding its share of the machine."""
    del nextitem
    if os.environ.get(RUN_ID) is None:
        yield
        return
    # pytest-xdist gives each worker the directory <the run's base temporary directory>/<worker>.
    directory = os.path.dirname(item.config.option.basetemp)
    with machine_share(item.get_closest_marker(ALONE) is not None, directory):
        yield
