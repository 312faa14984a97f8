"""Input pipeline throughput versus the LSTM model_fn's consumption, at the same batch.

    python benchmarks/input_pipeline.py [--rounds 5] [--batch-size 64] [--time-steps 24]

Measures, in one process and alternating round by round (timings on a shared machine
swing by tens of percent, so only same-run ratios and medians are meaningful):

* records/s of ``from_tfrecord`` over 8 shard files, ``from_csv``, ``from_arrays`` and
  ``time_series_streams``: batches pulled as fast as the pipeline makes them;
* examples/s the LSTM model_fn trains at in an Estimator, fed one cached batch, so the
  input costs nothing (its consumption rate).

Prints the median of each, and each input's median ratio to the model's rate; the goal
is a ratio >= 10, so input never limits training.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from typing import Any, Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import input_fns  # noqa: E402
import model_fns  # noqa: E402

NUM_EXAMPLES = 16_384
NUM_SHARDS = 8
MODEL_STEPS = 150
MODEL_WARMUP_STEPS = 30


def _data(time_steps: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(NUM_EXAMPLES, time_steps, 1)).astype(np.float32)
    return x, rng.integers(0, 3, NUM_EXAMPLES)


def _write_csv(path: str, x: np.ndarray, y: np.ndarray) -> None:
    header = ",".join(f"x{i}" for i in range(x.shape[1])) + ",label\n"
    rows = np.concatenate([x.reshape(len(x), -1), y[:, None]], axis=1)
    with open(path, "w", encoding="utf-8") as stream:
        stream.write(header)
        np.savetxt(stream, rows, delimiter=",", fmt="%.6g")


@tf.function
def _pull(iterator: Any, batches: tf.Tensor) -> None:
    for _ in tf.range(batches):
        iterator.get_next()


def _records_per_second(input_fn: Callable[[], Any], batch_size: int, batches: int) -> float:
    """Records/s pulling ``batches`` batches from a warmed-up pipeline (no Python per batch)."""
    iterator = iter(input_fn())
    _pull(iterator, tf.constant(20))
    start = time.perf_counter()
    _pull(iterator, tf.constant(batches))
    return batches * batch_size / (time.perf_counter() - start)


class _StepTimer(tf.estimator.SessionRunHook):
    """Wall time from the end of the warm-up steps to the end of training."""

    def __init__(self, warmup: int) -> None:
        self.warmup, self.steps = warmup, 0
        self.start: float | None = None
        self.seconds: float | None = None

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self.steps += 1
        if self.steps == self.warmup:
            self.start = time.perf_counter()

    def end(self, session: Any) -> None:
        assert self.start is not None, f"training ran fewer than {self.warmup} steps"
        self.seconds = time.perf_counter() - self.start


def _model_examples_per_second(x: np.ndarray, y: np.ndarray, batch_size: int,
                               model_dir: str) -> float:
    params = {"num_units": 32, "num_classes": 3, "learning_rate": 0.01}
    batch = ({"x": x[:batch_size]}, y[:batch_size])
    estimator = tf.estimator.Estimator(
        model_fns.lstm_model_fn, params=params, model_dir=model_dir,
        config=tf.estimator.RunConfig(log_step_count_steps=None, save_summary_steps=None,
                                      save_checkpoints_steps=None, save_checkpoints_secs=None))
    timer = _StepTimer(MODEL_WARMUP_STEPS)
    estimator.train(lambda: tf.data.Dataset.from_tensors(batch).repeat(),
                    steps=MODEL_STEPS, hooks=[timer])
    assert timer.seconds is not None, "the hook's end did not run"
    return (MODEL_STEPS - MODEL_WARMUP_STEPS) * batch_size / timer.seconds


def _inputs(x: np.ndarray, y: np.ndarray, batch_size: int,
            directory: str) -> dict[str, Callable[[], Any]]:
    paths = input_fns.write_tfrecords({"x": x}, os.path.join(directory, "train"),
                                      num_shards=NUM_SHARDS, labels=y)
    csv_path = os.path.join(directory, "train.csv")
    _write_csv(csv_path, x, y)
    spec = {"x": tf.io.FixedLenFeature(x.shape[1:], tf.float32),
            "label": tf.io.FixedLenFeature([], tf.int64)}
    common: dict[str, Any] = dict(
batch_size=batch_size, seed=0)
    return {
        "from_tfrecord": input_fns.from_tfrecord(paths, spec, label_key="label", **common),
        "from_csv": input_fns.from_files([csv_path], "csv", x_shape=x.shape[1:], **common),
        "from_arrays": input_fns.from_arrays({"x": x}, y, **common),
        "time_series_streams": input_fns.time_series_streams(
            x.reshape(-1), num_streams=batch_size, window=x.shape[1]),
    }


def main(argv: list[str] | None = None) -> None:
    tf.get_logger().setLevel("ERROR")
    warnings.filterwarnings("ignore", message=".*is deprecated.*")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--time-steps", type=int, default=24)
    parser.add_argument("--batches", type=int, default=300, help="batches timed per input")
    args = parser.parse_args(argv)
    x, y = _data(args.time_steps)
    rates: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as directory:
        inputs = _inputs(x, y, args.batch_size, directory)
        for round_index in range(args.rounds):
            model_dir = os.path.join(directory, f"model-{round_index}")
            rates.setdefault("lstm_model_fn", []).append(
                _model_examples_per_second(x, y, args.batch_size, model_dir))
            for name, input_fn in inputs.items():
                rates.setdefault(name, []).append(
                    _records_per_second(input_fn, args.batch_size, args.batches))
            print(f"round {round_index + 1}/{args.rounds}: " + ", ".join(
                f"{k} {v[-1]:,.0f}/s" for k, v in rates.items()), file=sys.stderr)
    model = rates.pop("lstm_model_fn")
    print(f"batch {args.batch_size}, x [{args.time_steps}, 1], LSTM 32 units, Adam; "
          f"medians of {args.rounds} alternating rounds")
    print(f"{'':<22}{'records/s':>12}{'x model (median of per-round ratios)':>40}")
    print(f"{'lstm_model_fn':<22}{statistics.median(model):>12,.0f}{'1.0':>40}")
    for name, values in rates.items():
        ratio = statistics.median(v / m for v, m in zip(values, model))
        print(f"{name:<22}{statistics.median(values):>12,.0f}{ratio:>40.1f}")


if __name__ == "__main__":
    main()
