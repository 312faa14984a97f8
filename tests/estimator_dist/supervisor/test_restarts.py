"""``--max-restarts``: a failed task restarts the whole local cluster, which resumes from
the last checkpoint; signals to the launcher are never restarts nor failures."""
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from estimator_dist import checkpoint_step
from estimator_dist.supervisor import restarts
from tests.support import REPO_ROOT, launched_tasks

pytestmark = pytest.mark.multi_process

_RESTART = re.compile(r"launch: (?P<task>worker [01]) failed with exit code (?P<code>-?\d+)"
                      r"(?: \(\w+\))?; restarting every task in \d+ s \((?P<n>\d) of 3\), "
                      r"resuming from step (?P<step>\d+)")
# Worker 1 exits 3 in its first N runs (N: the second argument; runs counted in a file).
_FAIL_FIRST = ("import json, os, sys; c = json.loads(os.environ['TF_CONFIG'])['task']\n"
               "count = os.path.join(sys.argv[1], 'runs')\n"
               "if c['index'] == 1:\n"
               "    runs = len(open(count).read()) if os.path.exists(count) else 0\n"
               "    open(count, 'a').write('x')\n"
               "    sys.exit(3 if runs < int(sys.argv[2]) else 0)\n")


def _launch(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "estimator_dist.launch", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)


def test_model_dir_of_reads_both_flag_spellings():
    assert restarts.model_dir_of(["train", "--model-dir", "runs/a"]) == "runs/a"
    assert restarts.model_dir_of(["train", "--model-dir=runs/b"]) == "runs/b"
    assert restarts.model_dir_of(["train", "--config", "c.yaml"]) is None


def test_restart_line_without_model_dir_says_last_checkpoint():
    line = restarts.restart_line("worker 1", "failed with exit code -9 (SIGKILL)", 1, 3, 1,
                                 None)
    assert line == ("launch: worker 1 failed with exit code -9 (SIGKILL); restarting every "
                    "task in 1 s (1 of 3), resuming from the last checkpoint")


def test_max_restarts_failed_task_restarts_cluster_then_succeeds(tmp_path):
    result = _launch("--workers", "2", "--max-restarts", "3", "--", sys.executable, "-c",
                     _FAIL_FIRST, str(tmp_path), "2")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("launch:")]
    assert lines == [f"launch: worker 1 failed with exit code 3; restarting every task in "
                     f"{wait} s ({n} of 3), resuming from the last checkpoint"
                     for n, wait in ((1, 1), (2, 2))]


def test_max_restarts_run_out_exit_non_zero_naming_task(tmp_path):
    result = _launch("--workers", "2", "--max-restarts", "1", "--", sys.executable, "-c",
                     _FAIL_FIRST, str(tmp_path), "5")
    assert result.returncode == 3
    assert result.stderr.splitlines()[-2:] == [
        "launch: worker 1 failed with exit code 3 after 1 restart; stopping the other tasks",
        "launch: worker 1 failed (exit 3) without a line on stderr"]
    assert (tmp_path / "runs").read_text() == "xx"


def test_max_restarts_with_nodes_refused_in_one_line():
    result = _launch("--nodes", "2", "--node-rank", "0", "--hosts", "a,b", "--workers", "1",
                     "--max-restarts", "2", "--", "true")
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert re.search(r"--max-restarts must be 0 with --nodes: .* Received: --max-restarts 2 "
                     r"--nodes 2", result.stderr)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_launch_signal_is_no_failure_nor_restart(tmp_path, signum):
    """Every task exits 128 + signal, as the train command does; the launcher reports none
    of them as failed and restarts nothing."""
    script = ("import signal, sys, time\n"
              "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(128 + s))\n"
              "signal.signal(signal.SIGINT, lambda s, f: sys.exit(128 + s))\n"
              "print('ready', flush=True)\n"
              "time.sleep(120)\n")
    process = subprocess.Popen([sys.executable, "-m", "estimator_dist.launch", "--workers", "2",
                                "--evaluator", "--max-restarts", "3", "--", sys.executable,
                                "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=REPO_ROOT)
    try:
        for _ in range(3):
            assert "ready" in process.stdout.readline()
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 128 + signum
    assert "failed" not in stderr and "restarting" not in stderr, stderr


def _wait_until(condition, process, deadline, what):
    while not condition():
        assert process.poll() is None, f"the launcher ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.mark.alone
@pytest.mark.slow
@pytest.mark.both_ends
@pytest.mark.timeout(600)
def test_launch_max_restarts_survives_two_worker_kills(tmp_path):
    model_dir = str(tmp_path / "model")
    log = tmp_path / "launch.log"
    max_steps = 1500
    with open(log, "w") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "estimator_dist.launch", "--workers", "2",
             "--max-restarts", "3", "--", sys.executable, "-m", "estimator_dist.train",
             "--strategy", "multi_worker", "--model-dir", model_dir, "--max-steps",
             str(max_steps), "--save-checkpoints-steps", "100", "--collective-timeout", "10",
             "--no-export"],
            stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
            env={k: v for k, v in os.environ.items() if k != "TF_CONFIG"})
    deadline = time.monotonic() + 540
    killed = []
    try:
        for kill in range(2):
            restarted_at = checkpoint_step.newest_step(model_dir)
            _wait_until(lambda: checkpoint_step.newest_step(model_dir) > restarted_at, process,
                        deadline, f"training before kill {kill + 1}")
            pids = list(launched_tasks(process.pid).values())
            assert len(pids) == 2, pids
            victim = random.choice(pids)
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)
            _wait_until(lambda: len(_RESTART.findall(log.read_text())) > kill, process,
                        deadline, f"restart {kill + 1}")
        code = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        process.kill()
        process.wait()
    text = log.read_text()
    restarted = list(_RESTART.finditer(text))
    assert code == 0, text[-3000:]
    # The two kills; a third restart, which --max-restarts 3 allows, may follow a step that
    # stalled past the collective timeout on a loaded machine.
    assert [m["code"] for m in restarted[:2]] == ["-9", "-9"], text[-3000:]
    assert int(restarted[1]["step"]) >= int(restarted[0]["step"]) > 0
    assert checkpoint_step.newest_step(model_dir) == max_steps


def test_backoff_doubles_to_its_cap_and_resets_after_a_long_run():
    backoff = restarts.Backoff()
    waits = [backoff.next_wait(1) for _ in range(9)]
    assert waits == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    assert backoff.next_wait(restarts.RESET_AFTER_SECONDS) == 1
    assert backoff.next_wait(1) == 2


@pytest.mark.parametrize("seconds, before, after, at_start", [
    (2, 0, 0, True), (2, None, None, True), (2, 100, 200, False),
    (restarts.START_SECONDS, 0, 0, False), (2, 100, None, True)])
def test_failed_at_start_is_quick_and_without_a_new_checkpoint(seconds, before, after,
                                                               at_start):
    assert restarts.failed_at_start(seconds, before, after) is at_start


def test_stop_signal_reads_killed_and_handled_exits():
    assert restarts.stop_signal(-signal.SIGTERM) == restarts.stop_signal(143) == signal.SIGTERM
    assert restarts.stop_signal(-signal.SIGINT) == restarts.stop_signal(130) == signal.SIGINT
    assert restarts.stop_signal(-signal.SIGKILL) is restarts.stop_signal(1) is None


def test_max_restarts_past_cap_refused_in_one_line():
    result = _launch("--workers", "1", "--max-restarts", "1000000", "--", "false", timeout=30)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert re.search(rf"--max-restarts must be at most {restarts.MAX_RESTARTS} \(.*\)\. "
                     r"Received: --max-restarts 1000000", result.stderr), result.stderr


_RESTART_WAIT = re.compile(r"^launch: worker 0 failed with exit code 1; restarting every task "
                           r"in (?P<wait>\d+) s \((?P<n>\d+) of 100\)", re.MULTILINE)


def test_max_restarts_command_failing_at_start_not_restarted_forever():
    started = time.monotonic()
    result = _launch("--workers", "1", "--max-restarts", "100", "--", "false", timeout=60)
    seconds = time.monotonic() - started
    assert result.returncode == 1, result.stderr
    assert [m["wait"] for m in _RESTART_WAIT.finditer(result.stderr)] == ["1", "2"]
    assert result.stderr.splitlines()[-2:] == [
        "launch: worker 0 failed with exit code 1 at start in 3 runs in a row (each within "
        f"{restarts.START_SECONDS} s, no new checkpoint): a command that fails at start is "
        "not restarted; stopping the other tasks",
        "launch: worker 0 failed (exit 1) without a line on stderr"]
    assert seconds < 30


# Each run writes a checkpoint one step past the last, then fails: never "at start".
_PROGRESS_THEN_FAIL = (
    "import os, sys\n"
    "path = os.path.join(sys.argv[2], 'checkpoint')\n"
    "step = int(open(path).read().split('-')[-1].strip('\"\\n')) if os.path.exists(path) else 0\n"
    "open(path, 'w').write(f'model_checkpoint_path: \"model.ckpt-{step + 1}\"\\n')\n"
    "sys.exit(1)\n")


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_max_restarts_crash_loop_backs_off_to_few_restarts_in_30_s(tmp_path):
    started = time.monotonic()
    result = _launch("--workers", "1", "--max-restarts", "100", "--timeout", "30", "--",
                     sys.executable, "-c", _PROGRESS_THEN_FAIL, "--model-dir", str(tmp_path),
                     timeout=80)
    seconds = time.monotonic() - started
    waits = [int(m["wait"]) for m in _RESTART_WAIT.finditer(result.stderr)]
    assert result.returncode == 124, result.stderr
    assert waits == [1, 2, 4, 8, 16], result.stderr
    assert result.stderr.splitlines()[-1] == (
        "launch: --timeout 30 s ran out while waiting to restart")
    assert checkpoint_step.newest_step(str(tmp_path)) == 5  # Five runs: four restarts.
    assert seconds < 60
