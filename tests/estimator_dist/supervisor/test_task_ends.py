"""Any task's end is the job's end, named by its role: a ps that exits, a task stopped
by a signal (never a restart), an evaluator that fails; a chief, worker or evaluator that
exits 0 ends nothing. And no task outlives the launcher, even its SIGKILL.

``end_of`` is checked on tasks that exited with a given code; then through the launcher,
with stand-in tasks (plain Python, no TensorFlow) that print ``ready PID`` and sleep; one
real ``parameter_server`` job checks that a ps stopped alone ends the whole job.
"""
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import types

import pytest

from estimator_dist import checkpoint_step, ps_stop
from estimator_dist.supervisor import supervise
from estimator_dist.supervisor.task_ends import End, end_of
from tests.support import REPO_ROOT, launched_tasks

def _task(name, code):
    """A task whose process exited with ``code`` (None: it runs)."""
    return types.SimpleNamespace(name=name, task_type=name.split()[0],
                                 process=types.SimpleNamespace(poll=lambda: code))


@pytest.mark.parametrize("running, words", [
    (["worker 0"], "worker 0 still needs it"),
    (["chief 0", "worker 0"], "chief 0 and worker 0 still need it"),
    (["chief 0", "worker 0", "worker 1"], "chief 0, worker 0, and worker 1 still need it")])
def test_end_of_ps_exiting_0_while_trainers_run_fails_naming_them(running, words):
    ps = _task("ps 0", 0)
    trainers = [_task(name, None) for name in running] + [_task("worker 9", 0)]
    assert end_of(ps, trainers) == End("failed", ps, f"ended with exit code 0 while {words}")


def test_end_of_ps_exiting_0_after_the_trainers_ends_nothing():
    assert end_of(_task("ps 0", 0), [_task("chief 0", 0)]) is None


@pytest.mark.parametrize("name", ["chief 0", "worker 1", "evaluator 0"])
def test_end_of_trainer_or_evaluator_exiting_0_ends_nothing(name):
    assert end_of(_task(name, 0), [_task("chief 0", None)]) is None


def test_trainer_stopped_after_its_ps_said_it_stops_is_the_ps_s_stop(tmp_path):
    chief, ps = _task("chief 0", 143), _task("ps 0", None)
    stopped = End("stopped", chief, "was stopped by SIGTERM (exit code 143)", signal.SIGTERM)
    since = time.time()
    assert supervise._stopped_by_ps(stopped, [chief, ps], str(tmp_path), since) == stopped
    ps_stop.announce(str(tmp_path), "ps 0 got SIGTERM")
    assert supervise._stopped_by_ps(stopped, [chief, ps], str(tmp_path), since) == End(
        "stopped", ps, "got SIGTERM; its chief and workers stopped after their step, the "
                       "chief saving it", signal.SIGTERM)
    # A word from an earlier run, or no model dir the launcher knows: the chief's own stop.
    assert supervise._stopped_by_ps(stopped, [chief, ps], str(tmp_path), time.time() + 1) \
        == stopped
    assert supervise._stopped_by_ps(stopped, [chief, ps], None, since) == stopped


def test_end_of_running_task_ends_nothing():
    assert end_of(_task("worker 0", None), []) is None


@pytest.mark.parametrize("code, why", [(143, "exit code 143"), (-15, "exit code -15 (SIGTERM)")])
def test_end_of_task_stopped_by_sigterm_is_stopped(code, why):
    task = _task("worker 0", code)
    assert end_of(task, []) == End("stopped", task, f"was stopped by SIGTERM ({why})",
                                   signal.SIGTERM)


def test_end_of_evaluator_failing_fails_the_run():
    task = _task("evaluator 0", 3)
    assert end_of(task, []) == End("failed", task, "failed with exit code 3")


# Exits 128 + SIGTERM on SIGTERM, as the train command does. The role named by END_ROLE
# exits END_CODE at once; the others sleep SLEEP seconds, then print "done".
_STAND_IN = """
import json, os, signal, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
print("ready", os.getpid(), flush=True)
if task["type"] == os.environ.get("END_ROLE"):
    sys.exit(int(os.environ["END_CODE"]))
time.sleep(float(os.environ.get("SLEEP", "120")))
print("done", flush=True)
"""
_ENDED_SECONDS = 20


def _env(**values):
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    return {**env, "PYTHONPATH": REPO_ROOT, **values}


def _launch(flags, env=None, timeout=60):
    return subprocess.run([sys.executable, "-m", "estimator_dist.launch", *flags, "--",
                           sys.executable, "-c", _STAND_IN], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT, env=_env(**(env or {})))


def _gone(pid):
    """Whether process ``pid`` has ended (a zombie no one reaped yet counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as file:
            return file.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@contextlib.contextmanager
def _launched(flags, ready, command=None, env=None):
    """Starts the launcher; yields (process, {task name: pid}) once ``ready`` tasks said
    ``ready``. Leaving kills whatever is left of it and its tasks."""
    process = subprocess.Popen(
        [sys.executable, "-m", "estimator_dist.launch", *flags, "--",
         *(command or [sys.executable, "-c", _STAND_IN])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
        env=_env(**(env or {})))
    pids = {}
    try:
        while len(pids) < ready:
            line = process.stdout.readline()
            assert line, f"the launcher ended first: {process.stderr.read()}"
            found = re.match(r"\[(?P<name>\w+ \d+)\] ready (?P<pid>\d+)", line)
            if found:
                pids[found["name"]] = int(found["pid"])
        yield process, pids
    finally:
        for pid in pids.values():
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
        process.kill()
        process.wait()


def _launch_lines(stderr):
    return [line for line in stderr.splitlines() if line.startswith("launch:")]


@pytest.mark.multi_process
@pytest.mark.timeout(90)
@pytest.mark.parametrize("role", ["ps 0", "chief 0", "worker 0"])
def test_task_stopped_by_sigterm_ends_job_as_stopped_without_restart(role):
    with _launched(["--workers", "2", "--ps", "1", "--max-restarts", "3"], 3) as (process,
                                                                                 pids):
        os.kill(pids[role], signal.SIGTERM)
        sent = time.monotonic()
        _, stderr = process.communicate(timeout=60)
        seconds = time.monotonic() - sent
        assert all(_gone(pid) for pid in pids.values())
    assert process.returncode == 128 + signal.SIGTERM, stderr
    assert _launch_lines(stderr) == [
        f"launch: {role} was stopped by SIGTERM (exit code 143); stopping the other tasks"]
    assert seconds < _ENDED_SECONDS


@pytest.mark.multi_process
@pytest.mark.timeout(90)
def test_ps_killed_by_sigterm_without_handler_is_stopped():
    script = "import os, time; print('ready', os.getpid(), flush=True); time.sleep(120)"
    with _launched(["--workers", "2", "--ps", "1"], 3,
                   command=[sys.executable, "-c", script]) as (process, pids):
        os.kill(pids["ps 0"], signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 128 + signal.SIGTERM
    assert _launch_lines(stderr) == ["launch: ps 0 was stopped by SIGTERM (exit code -15 "
                                     "(SIGTERM)); stopping the other tasks"]


@pytest.mark.multi_process
@pytest.mark.timeout(90)
@pytest.mark.parametrize("code", [0, 1])
def test_ps_ending_while_trainers_run_fails_job_naming_it(code):
    started = time.monotonic()
    result = _launch(["--workers", "2", "--ps", "1"], env={"END_ROLE": "ps",
                                                           "END_CODE": str(code)})
    why = ("ended with exit code 0 while chief 0 and worker 0 still need it" if code == 0
           else "failed with exit code 1")
    assert result.returncode == 1, result.stderr
    cause = [] if code == 0 else ["launch: ps 0 failed (exit 1) without a line on stderr"]
    assert _launch_lines(result.stderr) == [f"launch: ps 0 {why}; stopping the other tasks",
                                            *cause]
    assert "done" not in result.stdout
    assert time.monotonic() - started < _ENDED_SECONDS


@pytest.mark.multi_process
@pytest.mark.timeout(90)
def test_ps_ending_restarts_cluster_under_max_restarts():
    result = _launch(["--workers", "2", "--ps", "1", "--max-restarts", "1"],
                     env={"END_ROLE": "ps", "END_CODE": "0"})
    assert result.returncode == 1, result.stderr
    assert _launch_lines(result.stderr) == [
        "launch: ps 0 ended with exit code 0 while chief 0 and worker 0 still need it; "
        "restarting every task in 1 s (1 of 1), resuming from the last checkpoint",
        "launch: ps 0 ended with exit code 0 while chief 0 and worker 0 still need it "
        "after 1 restart; stopping the other tasks"]


@pytest.mark.multi_process
@pytest.mark.timeout(90)
def test_evaluator_done_first_leaves_trainers_to_finish():
    result = _launch(["--workers", "2", "--evaluator"],
                     env={"END_ROLE": "evaluator", "END_CODE": "0", "SLEEP": "2"})
    assert result.returncode == 0, result.stderr
    assert sorted(line for line in result.stdout.splitlines() if "done" in line) == [
        "[worker 0] done", "[worker 1] done"]
    assert not _launch_lines(result.stderr)


@pytest.mark.multi_process
@pytest.mark.timeout(90)
def test_evaluator_failing_is_reported_and_fails_job():
    result = _launch(["--workers", "2", "--evaluator"],
                     env={"END_ROLE": "evaluator", "END_CODE": "5"})
    assert result.returncode == 5, result.stderr
    assert _launch_lines(result.stderr) == [
        "launch: evaluator 0 failed with exit code 5; stopping the other tasks",
        "launch: evaluator 0 failed (exit 5) without a line on stderr"]


# Each task starts a child of its own (``sleep``), in its process group: it must end too.
_WITH_CHILD = ("import os, subprocess, time; child = subprocess.Popen(['sleep', '120']); "
               "print('ready', os.getpid(), child.pid, flush=True); time.sleep(120)")


@pytest.mark.multi_process
@pytest.mark.timeout(90)
def test_launcher_killed_leaves_no_task_nor_task_child():
    process = subprocess.Popen(
        [sys.executable, "-m", "estimator_dist.launch", "--workers", "2", "--ps", "1",
         "--evaluator", "--", sys.executable, "-c", _WITH_CHILD],
        stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=_env())
    pids = []
    try:
        while len(pids) < 8:
            line = process.stdout.readline()
            assert line, "the launcher ended first"
            if " ready " in line:
                pids += [int(pid) for pid in line.split(" ready ")[1].split()]
        assert not any(_gone(pid) for pid in pids)
        process.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = [pid for pid in pids if not _gone(pid)]
    finally:
        process.kill()
        process.wait()
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert not left


@pytest.mark.alone
@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(400)
def test_parameter_server_job_ends_when_its_ps_is_stopped(tmp_path):
    """The real job: the ps tells the chief and worker it stops (``ps_stop``) and serves
    while they answer; they stop after their step, the chief saving it; the launcher names
    the ps."""
    model_dir = str(tmp_path / "model")
    with open(tmp_path / "launch.log", "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "estimator_dist.launch", "--workers", "2", "--ps", "1",
             "--timeout", "300", "--", sys.executable, "-m", "estimator_dist.train",
             "--strategy", "parameter_server", "--model-dir", model_dir, "--max-steps",
             "1000000", "--no-export"], stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
            env=_env())
    try:
        deadline = time.monotonic() + 240
        while not os.path.exists(os.path.join(model_dir, "model.ckpt-0.index")):
            assert process.poll() is None, (tmp_path / "launch.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the job never started training"
            time.sleep(0.5)
        time.sleep(3)
        before = checkpoint_step.newest_step(model_dir)
        os.kill(launched_tasks(process.pid)[("ps", 0)], signal.SIGTERM)
        sent = time.monotonic()
        code = process.wait(timeout=120)
        seconds = time.monotonic() - sent
    finally:
        process.kill()
        process.wait()
    text = (tmp_path / "launch.log").read_text()
    print(f"the job ended {seconds:.1f} s after SIGTERM to its ps")
    assert code == 128 + signal.SIGTERM, text[-3000:]
    assert _launch_lines(text) == [
        "launch: ps 0 got SIGTERM; its chief and workers stopped after their step, the chief "
        "saving it; stopping the other tasks"]
    assert seconds < 30, text[-3000:]
    assert checkpoint_step.newest_step(model_dir) > before, text[-3000:]
