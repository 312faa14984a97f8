"""A launch to its end: a failing task fails the cluster and stops the others, the ps
tasks stop when the workers are done, --timeout, the launcher's SIGTERM forwarded."""
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.multi_process


def _launch(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "estimator_dist.launch", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_launch_failing_task_fails_cluster_and_stops_others():
    script = ("import json, os, sys, time; c = json.loads(os.environ['TF_CONFIG']); "
              "sys.exit(3) if c['task']['index'] == 1 else time.sleep(120)")
    start = time.monotonic()
    result = _launch("--workers", "2", "--", sys.executable, "-c", script)
    assert result.returncode == 3
    assert "worker 1 failed with exit code 3" in result.stderr
    assert time.monotonic() - start < 60


def test_launch_ps_tasks_stopped_when_workers_finish():
    script = ("import json, os, time; c = json.loads(os.environ['TF_CONFIG']); "
              "time.sleep(300) if c['task']['type'] == 'ps' else print('done')")
    result = _launch("--workers", "2", "--ps", "1", "--", sys.executable, "-c", script)
    assert result.returncode == 0
    assert sorted(result.stdout.split()) == sorted(["[chief", "0]", "done", "[worker", "0]",
                                                    "done"])


def test_launch_timeout_fails_hanging_cluster():
    result = _launch("--workers", "1", "--timeout", "2", "--", sys.executable, "-c",
                     "import time; time.sleep(120)")
    assert result.returncode == 124
    assert "still running after --timeout 2 s" in result.stderr


def test_launch_forwards_sigterm_to_tasks(tmp_path):
    marker = tmp_path / "got-signal"
    script = ("import signal, sys, time\n"
              "def stop(signum, frame):\n"
              f"    open({str(marker)!r} + str(signum), 'w').close(); sys.exit(0)\n"
              "signal.signal(signal.SIGTERM, stop)\n"
              "print('ready', flush=True)\n"
              "time.sleep(120)\n")
    process = subprocess.Popen([sys.executable, "-m", "estimator_dist.launch", "--workers", "1",
                                "--", sys.executable, "-c", script],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert "ready" in process.stdout.readline()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
    finally:
        process.kill()
    assert code == 128 + signal.SIGTERM
    assert os.path.exists(f"{marker}{int(signal.SIGTERM)}")
