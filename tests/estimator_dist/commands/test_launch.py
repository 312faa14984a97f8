"""The local launcher: TF_CONFIG per task, failure propagation, signal forwarding."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from estimator_dist.commands import launch

pytestmark = pytest.mark.multi_process

_PRINT_TASK = ("import json, os; c = json.loads(os.environ['TF_CONFIG']); "
               "print('TASK', json.dumps(c))")


def _launch(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "estimator_dist.launch", *args],
                          capture_output=True, text=True, timeout=timeout)


def _tasks(stdout):
    return [json.loads(line.split("TASK ", 1)[1]) for line in stdout.splitlines()
            if "TASK " in line]


def test_launch_gives_each_task_its_tf_config():
    result = _launch("--workers", "2", "--evaluator", "--", sys.executable, "-c", _PRINT_TASK)
    assert result.returncode == 0, result.stderr
    configs = _tasks(result.stdout)
    assert sorted((c["task"]["type"], c["task"]["index"]) for c in configs) == [
        ("evaluator", 0), ("worker", 0), ("worker", 1)]
    clusters = {json.dumps(c["cluster"], sort_keys=True) for c in configs}
    assert len(clusters) == 1
    workers = configs[0]["cluster"]["worker"]
    assert len(set(workers)) == 2 and all(a.startswith("127.0.0.1:") for a in workers)


def test_launch_prefixes_output_with_task_name():
    result = _launch("--workers", "2", "--", sys.executable, "-c", "print('hello')")
    assert sorted(result.stdout.splitlines()) == ["[worker 0] hello", "[worker 1] hello"]


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


def test_free_ports_distinct():
    ports = launch.free_ports(4)
    assert len(set(ports)) == 4


def test_task_port_in_use_one_line_exit_2(python_run, tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port, other = taken.getsockname()[1], launch.free_ports(1)[0]
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
                     rf"{launch.max_local_tasks():,} tasks on this machine \(.*open files.*"
                     rf"memory each\)\. Received: {tasks} tasks", done.stderr), done.stderr
    assert time.monotonic() - started < 20


def test_launch_help_states_task_bound():
    done = _launch("--help")
    assert f"at most {launch.max_local_tasks():,}" in " ".join(done.stdout.split())
