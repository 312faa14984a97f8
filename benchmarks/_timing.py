"""What every benchmark here shares: the machine's sgemm ceiling, a steady-state rate
hook, alternating rounds with medians, and the header naming machine, TF and command.

Timings on a shared machine swing by tens of percent, so the systems of a comparison
run in one process, alternating round by round, and the report gives medians and the
median of the per-round ratios.
"""
from __future__ import annotations

import atexit
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tensorflow as tf

import estimator_dist

SGEMM_SIZE = 2048


def sgemm_gflops(size: int = SGEMM_SIZE, repeats: int = 5) -> float:
    """GFLOP/s of a ``size``³ float32 matmul: the machine's practical compute ceiling."""
    return matmul_gflops(tf.float32, size, repeats)


def matmul_gflops(dtype: Any, size: int = SGEMM_SIZE, repeats: int = 5) -> float:
    """GFLOP/s of a ``size``³ matmul in ``dtype`` (the best of ``repeats``).

    Runs in a ``tf.function`` (works under v1 behaviour too, in a session).
    """
    a = np.random.RandomState(0).rand(size, size).astype(np.float32)
    if tf.executing_eagerly():
        matmul = tf.function(lambda m: tf.reduce_sum(tf.cast(tf.matmul(m, m), tf.float32)))
        run = lambda: matmul(tf.cast(tf.constant(a), dtype)).numpy()  # noqa: E731
    else:
        graph = tf.Graph()
        with graph.as_default():
            matrix = tf.compat.v1.Variable(a)  # a variable: constants would be folded
            operand = tf.cast(matrix, dtype)
            product = tf.reduce_sum(tf.cast(tf.matmul(operand, operand), tf.float32))
            session = tf.compat.v1.Session(graph=graph)
            session.run(matrix.initializer)
        run = lambda: session.run(product)  # noqa: E731
    run()
    best = min(_seconds(run) for _ in range(repeats))
    return 2 * size ** 3 / best / 1e9


def _seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class RateHook(tf.estimator.SessionRunHook):
    """Measures examples/s of an Estimator's training after its first ``Session.run``.

    The first run (graph warm-up) is left out; the rate is the global steps taken after
    it, times ``batch_size``, over the time they took.
    """

    def __init__(self, batch_size: int) -> None:
        self._batch_size = batch_size
        self.rate: float | None = None

    def begin(self) -> None:
        self._global_step = tf.compat.v1.train.get_global_step()
        self._start: tuple[float, Any] | None = None

    def before_run(self, run_context: Any) -> Any:
        return tf.estimator.SessionRunArgs(self._global_step)

    def after_run(self, run_context: Any, run_values: Any) -> None:
        if self._start is None:
            self._start = (time.perf_counter(), run_context.session.run(self._global_step))

    def end(self, session: Any) -> None:
        assert self._start is not None, "no Session.run finished"
        seconds = time.perf_counter() - self._start[0]
        steps = session.run(self._global_step) - self._start[1]
        self.rate = steps * self._batch_size / seconds


def estimator_rate(estimator: Any, input_fn: Callable[..., Any], steps: int,
                   batch_size: int) -> float:
    """Trains ``estimator`` ``steps`` more steps; returns the steady-state examples/s."""
    hook = RateHook(batch_size)
    estimator.train(input_fn, steps=steps, hooks=[hook])
    assert hook.rate is not None, "the hook's end did not run"
    return hook.rate


def alternate(systems: Mapping[str, Callable[[], float]], rounds: int,
              baseline: str) -> tuple[dict[str, list[float]], float]:
    """Runs every system once per round, in turn, and the sgemm ceiling before each round.

    ``systems`` maps a name to a function returning examples/s. Prints each round and the
    medians; returns ({name: per-round rates}, median sgemm GFLOP/s).
    """
    rates: dict[str, list[float]] = {name: [] for name in systems}
    gflops: list[float] = []
    for round_index in range(rounds):
        gflops.append(sgemm_gflops(repeats=2))
        for name, measure in systems.items():
            rates[name].append(measure())
        line = ", ".join(f"{name} {values[-1]:,.0f}" for name, values in rates.items())
        print(f"  round {round_index + 1}: sgemm {gflops[-1]:.0f} GFLOP/s, {line}", flush=True)
    report(rates, baseline)
    print(f"  sgemm {SGEMM_SIZE}^3 float32: median {statistics.median(gflops):.0f} GFLOP/s "
          "over the rounds", flush=True)
    return rates, statistics.median(gflops)


def report(rates: Mapping[str, Sequence[float]], baseline: str) -> None:
    """Prints medians of examples/s and the median per-round ratio to ``baseline``."""
    for name, values in rates.items():
        ratios = [v / b for v, b in zip(values, rates[baseline])]
        print(f"  {name:<28} {statistics.median(values):>10,.0f} examples/s   "
              f"x{statistics.median(ratios):.2f} of {baseline}", flush=True)


def print_header() -> None:
    """Prints the machine, the versions and the command (the sgemm ceiling comes with the
    rounds, see ``alternate``)."""
    print(f"machine: {platform.machine()}, {os.cpu_count()} "
          f"CPU cores; TensorFlow {tf.__version__}, "
          f"{'v2' if tf.compat.v1.executing_eagerly_outside_functions() else 'v1'} behaviour")
    print("command: python " + " ".join(sys.argv), flush=True)


def blobs_input_fn(shape: Sequence[int], batch_size: int, num_classes: int = 2,
                   examples: int = 4096) -> Callable[[], Any]:
    """float features of ``shape`` per example, labels from the first feature, repeated
    forever, as a cached Dataset (the input costs next to nothing)."""
    x = np.random.RandomState(0).randn(examples, *shape).astype(np.float32)
    y = (x.reshape(examples, -1)[:, 0] > 0).astype(np.int64) % num_classes

    def input_fn() -> Any:
        data = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).cache().repeat()
        return data.batch(batch_size, drop_remainder=True).prefetch(2)

    return input_fn


def plain_mlp_model_fn(features: dict[str, Any], labels: Any, mode: str,
                       params: dict[str, Any]) -> Any:
    """What a legacy user writes: a ``tf.layers`` MLP of ``params["hidden_units"]`` over
    feature ``x``, ``tf.losses`` cross-entropy over 2 classes, v1 Adam."""
    v1 = tf.compat.v1
    net = features["x"]
    for units in params["hidden_units"]:
        net = v1.layers.dense(net, units, activation=tf.nn.relu)
    logits = v1.layers.dense(net, 2)
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.AdamOptimizer(1e-3).minimize(loss, v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def scratch_dir(prefix: str = "benchmark-") -> str:
    """A fresh directory, removed when the process exits: a benchmark leaves no model dirs
    behind (one that must keep them takes a directory of the user's)."""
    path = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def quiet_config(**kwargs: Any) -> Any:
    """A RunConfig in a fresh directory that writes as little as possible."""
    return estimator_dist.make_run_config(
        model_dir=scratch_dir(), save_checkpoints_secs=None, save_summary_steps=10**9,
        log_step_count_steps=10**9, **kwargs)
