"""What the replica divergence check costs: mirrored-2 training with and without it.

    python benchmarks/divergence_check.py [--rounds 7] [--steps 600]

Trains ``model_fns.dense_classifier_model_fn`` (64 -> 256 -> 256 -> 2, Adam, global batch
128) with a plain ``tf.estimator.Estimator`` over 2 logical CPU replicas, three ways in
every round, alternating so that machine noise hits all alike:

* "without": TensorFlow's own ``MirroredStrategy`` (ReductionToOneDevice), no check;
* "with": ``make_run_config("mirrored")``, the check at session start, after step 1,
  every ``divergence.CHECK_EVERY_STEPS`` steps and at the end;
* "every-step": the same check after every step, which shows what one check costs.

Prints the median time per step of each (steps 50 to the end, checkpoints and
summaries off) and its median ratio to "without" in the same round. Whole-run ratios
swing by more than the check costs on a shared machine, so it also times each check
itself (the hook's extra ``Session.run``) and prints the median check against the
median step of "without": the check's share of step time at the default interval.
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import estimator_dist  # noqa: E402
from estimator_dist import mends  # noqa: E402
from estimator_dist.distribute import run_config  # noqa: E402
from estimator_dist.hooks import divergence  # noqa: E402
from input_fns import from_arrays  # noqa: E402
from model_fns import dense_classifier_model_fn  # noqa: E402

_WARMUP_STEPS = 50
_PARAMS = {"hidden_units": [256, 256], "num_classes": 2, "learning_rate": 0.001}


class _StepTimer(tf.compat.v1.train.SessionRunHook):
    """Wall time from the end of step ``_WARMUP_STEPS`` to the end of the last step."""

    def __init__(self) -> None:
        self.steps = 0
        self.start: float | None = None
        self.stop: float | None = None

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.steps += 1
        if self.steps == _WARMUP_STEPS:
            self.start = time.perf_counter()
        self.stop = time.perf_counter()

    def seconds_per_step(self) -> float:
        if self.start is None or self.stop is None:
            raise RuntimeError(f"training ran {self.steps} steps, no more than the "
                               f"{_WARMUP_STEPS} warm-up steps")
        return (self.stop - self.start) / (self.steps - _WARMUP_STEPS)


_CHECK_SECONDS: list[float] = []


def _timed(run_check: Callable[[Any, Any], None]) -> Callable[[Any, Any], None]:
    def timed_run_check(self: Any, session: Any) -> None:
        start = time.perf_counter()
        try:
            return run_check(self, session)
        finally:
            _CHECK_SECONDS.append(time.perf_counter() - start)

    return timed_run_check


def _plain_strategy() -> Any:
    return tf.distribute.MirroredStrategy(
        ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice("/cpu:0"))


def _strategy(case: str) -> Any:
    if case == "without":
        return _plain_strategy()
    if case == "with":
        return estimator_dist.make_run_config("mirrored", num_replicas=2).train_distribute
    strategy = _plain_strategy()
    mends.apply("divergence_check", strategy,
                make_hook=functools.partial(divergence.DivergenceHook, every_n_steps=1))
    return strategy


def seconds_per_step(case: str, steps: int, input_fn: Callable[..., Any]) -> float:
    with tempfile.TemporaryDirectory() as model_dir:
        config = tf.estimator.RunConfig(
            model_dir=model_dir, train_distribute=_strategy(case),
            session_config=run_config.cpu_session_config(2), save_checkpoints_steps=10**9,
            save_summary_steps=10**9, log_step_count_steps=None)
        estimator = tf.estimator.Estimator(dense_classifier_model_fn, config=config,
                                           params=_PARAMS)
        timer = _StepTimer()
        estimator.train(input_fn, max_steps=steps, hooks=[timer])
    return timer.seconds_per_step()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=600)
    args = parser.parse_args(argv)
    estimator_dist.setup_cpu_replicas(2)
    # Every check timed (setattr: a method replaced on the class).
    setattr(divergence.DivergenceHook, "_run_check", _timed(divergence.DivergenceHook._run_check))
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(8192, 64)).astype(np.float32)
    input_fn = from_arrays({"x": x}, (x[:, 0] > 0).astype(np.int64), batch_size=128, seed=0)
    cases = ("without", "with", "every-step")
    times: dict[str, list[float]] = {case: [] for case in cases}
    for _ in range(args.rounds):
        for case in cases:
            times[case].append(seconds_per_step(case, args.steps, input_fn))
    print(f"mirrored-2, dense 64-256-256-2, batch 128: median ms/step over {args.rounds} "
          f"rounds of {args.steps} steps (check every {divergence.CHECK_EVERY_STEPS})")
    for case, values in times.items():
        ratios = [v / w for v, w in zip(values, times["without"])]
        print(f"  {case:<11} {1000 * statistics.median(values):8.3f} ms   "
              f"x{statistics.median(ratios):.3f} of without")
    check, step = statistics.median(_CHECK_SECONDS), statistics.median(times["without"])
    print(f"  one check: median {1000 * check:.3f} ms over {len(_CHECK_SECONDS)} checks "
          f"(the one at session start: up to {1000 * max(_CHECK_SECONDS):.0f} ms) = "
          f"{check / step:.2f} steps; every {divergence.CHECK_EVERY_STEPS} steps: "
          f"{100 * check / step / divergence.CHECK_EVERY_STEPS:.2f} % of step time")


if __name__ == "__main__":
    main()
