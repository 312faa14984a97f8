"""The workers of a run share the machine: a test marked alone runs with none beside it."""
import multiprocessing
import subprocess
import time

import pytest

from tests import support
from tests.sharing import RUN_ID, machine_share


def _hold(alone, directory, started, seconds):
    with machine_share(alone, directory):
        started.set()
        time.sleep(seconds)


def _start(alone, directory, seconds):
    started = multiprocessing.Event()
    process = multiprocessing.get_context("fork").Process(
        target=_hold, args=(alone, directory, started, seconds))
    process.start()
    assert started.wait(30)
    return process


def _waited(alone, directory):
    """Seconds this process waits to hold the machine as ``alone`` says."""
    began = time.monotonic()
    with machine_share(alone, directory):
        return time.monotonic() - began


@pytest.mark.parametrize("running, starting, waits", [
    (False, False, False),  # Tests not marked alone run beside each other.
    (False, True, True),    # An alone test waits for the test running.
    (True, False, True),    # No test starts beside an alone one.
])
def test_alone_tests_run_with_no_other_beside_them(tmp_path, running, starting, waits):
    other = _start(running, str(tmp_path), 2)
    try:
        assert (_waited(starting, str(tmp_path)) > 1) == waits
    finally:
        other.join(30)


def test_grouped_tests_run_on_one_worker(pytester):
    """The xdist_group marks the suite's shared runs carry hold under ``pytest -n N``."""
    pytester.makepyfile(test_groups="""
        import os
        import pytest

        @pytest.mark.xdist_group("one")
        @pytest.mark.parametrize("i", range(6))
        def test_grouped(i):
            open(os.environ["PYTEST_XDIST_WORKER"] + ".ran", "w").close()
        """)
    result = pytester.runpytest_subprocess("-n", "3", "--dist", "loadgroup",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)
    assert len(list(pytester.path.glob("*.ran"))) == 1


def test_rerun_under_tf1_behaviour_takes_no_share_of_its_own(monkeypatch):
    """The rerun's pytest is part of the test that started it, which holds its share: were
    its tests to take shares of their own, an alone test queued meanwhile would hold the
    turnstile they wait for while it waits for the test, which waits for them, until the
    time limit ended the worker (pytest-xdist: "node down: Not properly terminated")."""
    monkeypatch.setenv(RUN_ID, "run")
    envs = []

    def run(args, **kwargs):
        envs.append(kwargs["env"])
        return subprocess.CompletedProcess(args, 0, "", "")

    monkeypatch.setattr(support.subprocess, "run", run)
    support.assert_passes_under_tf1_behaviour(__file__, timeout=1)
    [env] = envs
    assert RUN_ID not in env and env[support.TF1_BEHAVIOUR_ENV] == "1"
