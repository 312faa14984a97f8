"""The launcher's last line is the job's root cause: the first failing task's own last line
on stderr, after the tasks it stopped have said their last (one line each at most).

``cause_line`` is checked on tasks that exited with a given code; then a launch of stand-in
tasks (plain Python), whose stopped peer writes after the failure; then real jobs
(``first_failure_job.py``), one per kind of first failure, each a launch of tiny programs
that fail within seconds.
"""
import os
import signal
import subprocess
import sys
import types

import pytest

from estimator_dist.supervisor.supervise import cause_line
from estimator_dist.supervisor.task_ends import End
from tests.support import REPO_ROOT


def _failed(code, last_error_line=""):
    task = types.SimpleNamespace(name="worker 0", task_type="worker",
                                 last_error_line=last_error_line,
                                 process=types.SimpleNamespace(returncode=code))
    return End("failed", task, f"failed with exit code {code}")


@pytest.mark.parametrize("end, line", [
    (_failed(1, "ValueError: no data"), "launch: worker 0 failed (exit 1): ValueError: no data"),
    (_failed(3), "launch: worker 0 failed (exit 3) without a line on stderr"),
    (_failed(-9, "I0000 a log line"), "launch: worker 0 failed (killed by SIGKILL)"),
    (_failed(0, "ps exited 0 while needed"), None),
    (End("stopped", _failed(143).task, "was stopped by SIGTERM", signal.SIGTERM), None),
    (End("done"), None)])
def test_cause_line_repeats_the_failed_task_s_own_last_stderr_line(end, line):
    assert cause_line(end) == line


def _env():
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    return {**env, "PYTHONPATH": REPO_ROOT}


def _launch(flags, command, timeout):
    return subprocess.run([sys.executable, "-m", "estimator_dist.launch", *flags, "--",
                           *command], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO_ROOT, env=_env())


# Worker 0 fails with a traceback after 3 s; worker 1 waits, and says its last on SIGTERM.
_FAILS_OR_WAITS = """
import json, os, signal, sys, time
if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0:
    time.sleep(3)
    raise ValueError("the real reason")
def stopped(signum, frame):
    print("stopped while waiting for worker 0", file=sys.stderr, flush=True)
    sys.exit(128 + signum)
signal.signal(signal.SIGTERM, stopped)
time.sleep(120)
"""


@pytest.mark.multi_process
@pytest.mark.timeout(90)
def test_launch_ends_with_the_first_failure_s_line_after_the_stopped_peer_s():
    result = _launch(["--workers", "2"], [sys.executable, "-c", _FAILS_OR_WAITS], 60)
    assert result.returncode == 1, result.stderr
    assert "[worker 0] ValueError: the real reason" in result.stdout
    assert "[worker 1] stopped while waiting for worker 0" in result.stdout
    assert result.stderr.splitlines() == [
        "launch: worker 0 failed with exit code 1; stopping the other tasks",
        "launch: worker 0 failed (exit 1): ValueError: the real reason"]


_LATE_CONFIG = ("call estimator_dist.make_run_config at the start of the program, before "
                "any TensorFlow op runs.")


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind, strategy, cause", [
    pytest.param("late_config", "multi_worker", "worker 0 failed (exit 1): RuntimeError: "
                 "multi_worker configures TensorFlow's collective ops, which must happen "
                 "before the TensorFlow runtime starts, but it already started: " + _LATE_CONFIG,
                 marks=pytest.mark.both_ends, id="late_config"),
    pytest.param("rendezvous", "parameter_server", "chief 0 failed (exit 1): estimator_dist."
                 "distribute.rendezvous.RendezvousError: rendezvous: could not reach worker 0 "
                 "at ", id="rendezvous"),
    pytest.param("input_fn", "parameter_server", "chief 0 failed (exit 1): ValueError: "
                 "input_fn: the training files are missing", marks=pytest.mark.both_ends,
                 id="input_fn"),
    pytest.param("model_fn", "multi_worker", "worker 0 failed (exit 1): ValueError: model_fn: "
                 "this model cannot be built", id="model_fn"),
    pytest.param("lost_peer", "multi_worker", "worker 1 failed (killed by SIGKILL)",
                 id="lost_peer")])
def test_launch_last_line_is_the_first_failure_of_a_real_job(tmp_path, kind, strategy, cause):
    flags = ["--workers", "2"] + (["--ps", "1"] if strategy == "parameter_server" else [])
    result = _launch(flags, [sys.executable, "-m", "tests.programs.first_failure_job", kind,
                             strategy, str(tmp_path / "model")], 240)
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stderr.splitlines()[-1].startswith(f"launch: {cause}"), result.stderr
    if kind in ("late_config", "rendezvous"):  # The others wait for the first: stopped.
        first = cause.split(" failed")[0]
        assert not [line for line in result.stdout.splitlines() if "Traceback" in line
                    and not line.startswith(f"[{first}]")], result.stdout[-3000:]
