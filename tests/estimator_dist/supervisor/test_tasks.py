"""The task processes: each task its TF_CONFIG, its output prefixed with its name."""
import json
import subprocess
import sys

import pytest

from estimator_dist.supervisor import tasks

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


def test_free_ports_distinct():
    ports = tasks.free_ports(4)
    assert len(set(ports)) == 4
