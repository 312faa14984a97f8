"""What PreemptionHook costs a multi-worker step: its one-number all-reduce per step.

    python benchmarks/preemption_vote.py              # 5 rounds, 2 workers, 450 steps
    python benchmarks/preemption_vote.py --rounds 3 --steps 200

Each round trains the dense model_fn on two local workers (MultiWorkerMirroredStrategy,
TF_CONFIG on 127.0.0.1) twice, with and without ``PreemptionHook``, in alternating order,
and times steps 50 to ``--steps`` (450) on the chief. Prints steps/s medians over the rounds and the
median of the per-round ratios (with / without): timings on a shared machine swing, so
only same-round ratios mean much.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _REPO)  # The package of this checkout, not an installed one.
# TensorFlow (and what loads it) is imported inside the functions that use it: a process
# loads it only for the part it runs (a task, or the driver's report).
_FIRST_STEP = 50


def _first_step(last_step: int) -> int:
    return min(_FIRST_STEP, last_step // 4)


def _worker(model_dir: str, with_hook: bool, last_step: int) -> None:
    """One task: trains to ``last_step``; the chief prints the steps/s from the first
    timed step."""
    import numpy as np
    import tensorflow as tf

    import estimator_dist
    import model_fns
    from input_fns import from_arrays

    class Timer(tf.compat.v1.train.SessionRunHook):
        def __init__(self) -> None:
            self.times: dict[int, float] = {}

        def before_run(self, run_context: Any) -> Any:
            return tf.compat.v1.train.SessionRunArgs(tf.compat.v1.train.get_global_step())

        def after_run(self, run_context: Any, run_values: Any) -> None:
            if run_values.results in (first_step, last_step - 1):
                self.times[run_values.results] = time.perf_counter()

    first_step = _first_step(last_step)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 16)).astype(np.float32)
    y = (x.sum(axis=1) > 0).astype(np.int64)
    config = estimator_dist.make_run_config("multi_worker", model_dir=model_dir,
                                            save_checkpoints_steps=10**6, tf_random_seed=1)
    estimator = tf.estimator.Estimator(model_fns.dense_classifier_model_fn, config=config,
                                       params={"hidden_units": [32, 32], "num_classes": 2,
                                               "learning_rate": 0.01})
    timer = Timer()
    hooks = [timer] + ([estimator_dist.PreemptionHook()] if with_hook else [])
    tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(from_arrays({"x": x}, y, batch_size=64),
                                          max_steps=last_step, hooks=hooks),
        tf.estimator.EvalSpec(from_arrays({"x": x}, y, batch_size=64, num_epochs=1)))
    if config.is_chief:
        steps = last_step - 1 - first_step
        print("STEPS_PER_SECOND", steps / (timer.times[last_step - 1] - timer.times[first_step]))


def _cluster_run(with_hook: bool, last_step: int) -> float:
    """Steps/s of the chief of one two-worker run."""
    from estimator_dist.supervisor.tasks import free_ports

    ports = free_ports(2)
    workers = [f"127.0.0.1:{port}" for port in ports]
    with tempfile.TemporaryDirectory() as model_dir:
        processes = []
        for index in range(2):
            tf_config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
            env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), PYTHONPATH=_REPO,
                       TF_CPP_MIN_LOG_LEVEL="2")
            processes.append(subprocess.Popen(
                [sys.executable, __file__, "--worker", model_dir, str(int(with_hook)),
                 "--steps", str(last_step)],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        outputs = [p.communicate(timeout=600)[0] for p in processes]
    line, = [text for text in outputs[0].splitlines() if text.startswith("STEPS_PER_SECOND")]
    return float(line.split()[1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=450, help="the last step of each run")
    parser.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker[0], args.worker[1] == "1", args.steps)
        return
    with_hook: list[float] = []
    without: list[float] = []
    ratios: list[float] = []
    for round_index in range(args.rounds):
        order = (True, False) if round_index % 2 == 0 else (False, True)
        speeds = {hook: _cluster_run(hook, args.steps) for hook in order}
        with_hook.append(speeds[True])
        without.append(speeds[False])
        ratios.append(speeds[True] / speeds[False])
        print(f"round {round_index + 1}: with hook {speeds[True]:.1f} steps/s, without "
              f"{speeds[False]:.1f} steps/s, ratio {ratios[-1]:.3f}", flush=True)
    print(f"median: with hook {statistics.median(with_hook):.1f} steps/s, without "
          f"{statistics.median(without):.1f} steps/s, ratio {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
