"""The short soak CI runs: two multi_worker workers of the CLI's dense model, through the
launcher, for at least 120 s; every task stays below 1,000 threads.

With collectives launched under a timeout (TF 2.15 holds a thread per collective for the
whole timeout) a worker passes 1,000 threads within about 10 s of its first step.
"""
import json

import pytest

SECONDS = 120
MAX_THREADS = 1000


@pytest.mark.alone
@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(SECONDS + 240)
def test_multi_worker_soak_threads_stay_below_limit(python_run, tmp_path):
    samples = tmp_path / "soak.json"
    result = python_run(["benchmarks/soak.py", "--cases", "multi_worker", "--seconds",
                         str(SECONDS), "--interval", "5", "--max-threads", str(MAX_THREADS),
                         "--json", str(samples)], timeout=SECONDS + 200)
    run = json.loads(samples.read_text())["multi_worker"]
    workers = {task: s for task, s in run["tasks"].items() if task.startswith("worker")}
    most = {task: max(sample["threads"] for sample in s) for task, s in workers.items()}
    assert len(workers) == 2, result.stdout[-2000:]
    assert max(most.values()) < MAX_THREADS, result.stdout[-2000:]
    assert run["ended"] is None, result.stdout[-2000:]  # Still training when sampling ended.
    assert run["dir"][-1]["t"] >= SECONDS - 5
    assert run["dir"][-1]["step"] > 0, result.stdout[-2000:]
