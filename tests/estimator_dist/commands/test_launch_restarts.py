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

from estimator_dist.commands import restarts
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.multi_process

_RESTART = re.compile(r"launch: (?P<task>worker [01]) failed with exit code (?P<code>-?\d+)"
                      r"(?: \(\w+\))?; restarting every task \((?P<n>\d) of 3\), resuming "
                      r"from step (?P<step>\d+)")
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


def test_checkpoint_step_reads_checkpoint_file(tmp_path):
    assert restarts.checkpoint_step(str(tmp_path)) == 0
    (tmp_path / "checkpoint").write_text(
        f'model_checkpoint_path: "{tmp_path}/model.ckpt-1200"\n'
        'all_model_checkpoint_paths: "model.ckpt-600"\n')
    assert restarts.checkpoint_step(str(tmp_path)) == 1200
    assert restarts.checkpoint_step("gs://bucket/run") is None
    assert restarts.checkpoint_step(None) is None


def test_restart_line_without_model_dir_says_last_checkpoint():
    line = restarts.restart_line("worker 1", -9, 1, 3, None)
    assert line == ("launch: worker 1 failed with exit code -9 (SIGKILL); restarting every "
                    "task (1 of 3), resuming from the last checkpoint")


def test_max_restarts_failed_task_restarts_cluster_then_succeeds(tmp_path):
    result = _launch("--workers", "2", "--max-restarts", "3", "--", sys.executable, "-c",
                     _FAIL_FIRST, str(tmp_path), "2")
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("launch:")]
    assert lines == [f"launch: worker 1 failed with exit code 3; restarting every task ({n} "
                     "of 3), resuming from the last checkpoint" for n in (1, 2)]


def test_max_restarts_run_out_exit_non_zero_naming_task(tmp_path):
    result = _launch("--workers", "2", "--max-restarts", "1", "--", sys.executable, "-c",
                     _FAIL_FIRST, str(tmp_path), "5")
    assert result.returncode == 3
    assert result.stderr.splitlines()[-1] == (
        "launch: worker 1 failed with exit code 3 after 1 restart; stopping the other tasks")
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


def _task_pids(launcher_pid):
    """The launcher's child processes (its tasks)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except (OSError, ValueError):
            continue
        if entry.isdigit() and int(fields[1]) == launcher_pid:
            pids.append(int(entry))
    return pids


def _wait_until(condition, process, deadline, what):
    while not condition():
        assert process.poll() is None, f"the launcher ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.mark.slow
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
            restarted_at = restarts.checkpoint_step(model_dir)
            _wait_until(lambda: restarts.checkpoint_step(model_dir) > restarted_at, process,
                        deadline, f"training before kill {kill + 1}")
            pids = _task_pids(process.pid)
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
    assert restarts.checkpoint_step(model_dir) == max_steps
