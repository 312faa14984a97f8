"""The workers of a run share the machine: a test marked alone runs with none beside it."""
import multiprocessing
import time

from tests.sharing import machine_share


def _hold(alone, run_id, started, seconds):
    with machine_share(alone, run_id):
        started.set()
        time.sleep(seconds)


def _start(alone, run_id, seconds):
    started = multiprocessing.Event()
    process = multiprocessing.get_context("fork").Process(
        target=_hold, args=(alone, run_id, started, seconds))
    process.start()
    assert started.wait(30)
    return process


def _waited(alone, run_id):
    """Seconds this process waits to hold the machine as ``alone`` says."""
    began = time.monotonic()
    with machine_share(alone, run_id):
        return time.monotonic() - began


def test_tests_not_alone_run_beside_each_other(tmp_path):
    run_id = tmp_path.name
    other = _start(False, run_id, 3)
    try:
        assert _waited(False, run_id) < 1
    finally:
        other.join(30)


def test_alone_test_waits_for_the_running_test(tmp_path):
    run_id = tmp_path.name
    other = _start(False, run_id, 2)
    try:
        assert _waited(True, run_id) > 1
    finally:
        other.join(30)


def test_no_test_starts_beside_an_alone_one(tmp_path):
    run_id = tmp_path.name
    other = _start(True, run_id, 2)
    try:
        assert _waited(False, run_id) > 1
    finally:
        other.join(30)
