"""The launch command's front end: its flags checked, each mistake one line, exit 2."""
import json
import re
import socket
import subprocess
import sys
import time

import pytest

from estimator_dist.supervisor import capacity
from estimator_dist.supervisor.tasks import free_ports

pytestmark = pytest.mark.multi_process


def _launch(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "estimator_dist.launch", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["--workers", "2"], r"COMMAND must follow --"),
    (["--workers", "0", "--", "true"], r"--workers must be at least 1"),
    (["--workers", "two", "--", "true"], r"must be a non-negative int. Received: 'two'"),
    (["--workers", "2", "--", "/nonexistent/cmd"],
     r"COMMAND must be a program that can run. Received: '/nonexistent/cmd' \(No such file"),
])
def test_launch_bad_arguments_one_line_exit_2(args, message):
    result = _launch(*args)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert re.search(message, result.stderr)


def test_task_port_in_use_one_line_exit_2(python_run, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port, other = taken.getsockname()[1], free_ports(1)[0]
        tf_config = {"cluster": {"worker": [f"127.0.0.1:{port}", f"127.0.0.1:{other}"]},
                     "task": {"type": "worker", "index": 0}}
        result = python_run(["-m", "estimator_dist.train", "--strategy", "multi_worker",
                             "--model-dir", str(tmp_path / "model"), "--max-steps", "2"],
                            env={"TF_CONFIG": json.dumps(tf_config)}, timeout=180)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "python -m estimator_dist.train: error: TF_CONFIG must give this task a port free on "
        "this host (its gRPC server listens there). Received: worker 0 at "
        f"127.0.0.1:{port} (Address already in use)")


@pytest.mark.parametrize("flags, tasks", [(["--workers", "100000"], "100,000"),
                                          (["--workers", "2", "--ps", "100000"], "100,002")])
def test_launch_task_count_past_machine_bound_refused_at_once(flags, tasks):
    started = time.monotonic()
    done = _launch(*flags, "--allow-network-exposure", "--", "true", timeout=30)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert re.search(rf"--workers, --ps and --evaluator must add up to at most "
                     rf"{capacity.max_local_tasks():,} tasks on this machine \(.*open files.*"
                     rf"memory each\)\. Received: {tasks} tasks", done.stderr), done.stderr
    assert time.monotonic() - started < 20


def test_launch_help_states_task_bound():
    done = _launch("--help")
    assert f"at most {capacity.max_local_tasks():,}" in " ".join(done.stdout.split())
