"""How long each task of a parameter_server cluster takes to end after SIGTERM.

    python benchmarks/sigterm_roles.py                       # 2 rounds, this checkout
    python benchmarks/sigterm_roles.py --against /other/checkout --rounds 2

Each round starts the CLI's dense model as a chief, a worker, one ps and an evaluator
(TF_CONFIG on 127.0.0.1), waits for the step-0 checkpoint and a few seconds more, sends
SIGTERM to every task at once (as Kubernetes does when a job is deleted) and times each
task's exit, up to ``--limit`` seconds. With ``--against`` the rounds alternate between
this checkout and the other one (e.g. the code before a change). Prints each task's exit
code and seconds per round, and the medians; a task still running at the limit counts as
the limit.
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Mapping, Union

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)

from estimator_dist.distribute import cluster  # noqa: E402  (after the path)
from estimator_dist.supervisor.tasks import free_ports  # noqa: E402

_TASKS = [("chief", 0), ("worker", 0), ("ps", 0), ("evaluator", 0)]
_POLL_SECONDS = 0.1
# Task name -> (exit code, or "running" at the limit; seconds from SIGTERM to the exit).
ExitTimes = dict[str, tuple[Union[int, str], float]]


def _start(checkout: str, model_dir: str) -> dict[str, subprocess.Popen[bytes]]:
    spec, _ = cluster.local_cluster(free_ports(3), 2, num_ps=1, evaluator=True)
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    env["PYTHONPATH"] = checkout
    processes: dict[str, subprocess.Popen[bytes]] = {}
    for task_type, index in _TASKS:
        task_env = dict(env, TF_CONFIG=cluster.TFConfig(spec, task_type, index).to_json())
        processes[f"{task_type} {index}"] = subprocess.Popen(
            [sys.executable, "-m", "estimator_dist.train", "--strategy", "parameter_server",
             "--model-dir", model_dir, "--max-steps", "1000000", "--no-export"],
            env=task_env, cwd=checkout, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
    return processes


def _exit_times(processes: Mapping[str, subprocess.Popen[bytes]], limit: int) -> ExitTimes:
    """Seconds from SIGTERM to each process's exit (``limit`` if still running then)."""
    for process in processes.values():
        process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    ended: ExitTimes = {}
    while len(ended) < len(processes) and time.monotonic() - sent < limit:
        for name, process in processes.items():
            if name not in ended and process.poll() is not None:
                ended[name] = (process.returncode, time.monotonic() - sent)
        time.sleep(_POLL_SECONDS)
    return {name: ended.get(name, ("running", float(limit))) for name in processes}


def _round(checkout: str, settle: float, limit: int) -> ExitTimes:
    with tempfile.TemporaryDirectory() as scratch:
        model_dir = os.path.join(scratch, "model")
        processes = _start(checkout, model_dir)
        try:
            started = time.monotonic()
            while not os.path.exists(os.path.join(model_dir, "model.ckpt-0.index")):
                if time.monotonic() - started > 300:
                    raise RuntimeError(f"no step-0 checkpoint after 300 s from {checkout}")
                time.sleep(0.5)
            time.sleep(settle)
            return _exit_times(processes, limit)
        finally:
            for process in processes.values():
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against", metavar="CHECKOUT",
                        help="another checkout to alternate with (default: none)")
    parser.add_argument("--settle", type=float, default=5.0,
                        help="seconds of training after the step-0 checkpoint (default: 5)")
    parser.add_argument("--limit", type=int, default=60,
                        help="seconds to wait for the tasks to exit (default: 60)")
    args = parser.parse_args(argv)
    checkouts = [_REPO] + ([os.path.abspath(args.against)] if args.against else [])
    times: dict[str, list[ExitTimes]] = {checkout: [] for checkout in checkouts}
    for round_index in range(args.rounds):
        for checkout in checkouts:
            result = _round(checkout, args.settle, args.limit)
            times[checkout].append(result)
            cells = ", ".join(f"{name} {code} in {seconds:.1f} s"
                              for name, (code, seconds) in result.items())
            print(f"round {round_index + 1} {checkout}: {cells}", flush=True)
    for checkout, rounds in times.items():
        medians = ", ".join(
            f"{name} {statistics.median(r[name][1] for r in rounds):.1f} s"
            for name in rounds[0])
        print(f"median {checkout}: {medians}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
