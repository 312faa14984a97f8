"""A wide-and-deep model on one process, two workers and a parameter server: examples/s
and bytes per step.

    python benchmarks/wide.py [--rounds 3] [--steps 200] [--warmup 20] [--batch 512]
                              [--buckets 1000000] [--vocab 100000] [--dim 32]
                              [--model wide|census]
                              [--cases alone plain half dense rows ps]

The model is a canned ``tf.estimator.DNNLinearCombinedClassifier``: its linear part reads
a crossed column of two ids (``--buckets`` hash buckets, FTRL), its DNN part an
embedding of a third id (``--vocab`` rows × ``--dim``, Adagrad) through 64 → 32 units.
Each example touches one row of each table, so a step's gradients are a few hundred rows
of tables of millions. ``--model census`` is a trainer in the style of the ML-engine census
sample instead (run it at its batch: ``--batch 80``, 40 a worker): FTRL over crossed
columns of 10,000, 1,000,000 and 10,000 buckets and a hashed column, Adagrad for
100 → 70 → 50 → 25 units over two small embeddings, an indicator and two numeric columns
(``--buckets``, ``--vocab`` and ``--dim`` do not apply). The cases, each process pinned to
its own core (``taskset``; a ps task on every core), at one global batch:

* ``1 process`` — ``make_run_config("default")``, the whole batch: the baseline.
* ``1 process, plain TF`` — a plain ``RunConfig()``: TensorFlow's own lookups, which read
  each whole table every step (the ``embedding_rows`` mend's defect).
* ``1 process, half batch`` — ``make_run_config("default")``, one worker's share of the
  batch: the step two workers could reach if their exchange cost nothing (and the other
  core sat idle).
* ``2 workers, dense`` — ``make_run_config("multi_worker", sparse_gradients="dense")``:
  every sparse gradient all-reduced as its dense table, each worker on half the batch.
* ``2 workers, rows`` — ``make_run_config("multi_worker")`` (``sparse_gradients="auto"``):
  the tables cross as the rows a step touched.
* ``parameter_server`` — ``make_run_config("parameter_server")``: a chief and a worker,
  each on half the batch, asynchronous, 1 ps task.

The cases alternate within each round; each reports the chief's median step time after
``--warmup`` steps (examples/s = global batch / that: under parameter_server both
workers step at about the chief's speed) and the median of the per-round ratios to the
baseline. Bytes per step are what the chief's process sent and received over its TCP
connections (``ss``'s counters) between the end of the warm-up and the end, over the
steps in between.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Union

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scaling  # noqa: E402  (its task launcher and step timing)

# TensorFlow (and what loads it) is imported inside the functions that use it: a process
# loads it only for the part it runs (a task, or the driver's report).
CASES = {"alone": "1 process", "plain": "1 process, plain TF",
         "half": "1 process, half batch", "dense": "2 workers, dense",
         "rows": "2 workers, rows", "ps": "parameter_server, 2 workers + 1 ps"}
BASELINE = CASES["alone"]
# kind -> (cluster layout or None, [(task type, index)]), as scaling.run_tasks takes them.
Layout = tuple[Union[dict[str, int], None], scaling.Tasks]
LAYOUTS: dict[str, Layout] = {
    "alone": (None, [(None, 0)]), "plain": (None, [(None, 0)]), "half": (None, [(None, 0)]),
    "dense": ({"worker": 2}, [("worker", 0), ("worker", 1)]),
    "rows": ({"worker": 2}, [("worker", 0), ("worker", 1)]),
    "ps": ({"chief": 1, "worker": 1, "ps": 1}, [("ps", 0), ("chief", 0), ("worker", 0)])}


# ---- one task: runs in a child process ------------------------------------------------

def tcp_bytes() -> int | None:
    """Bytes this process has sent and received over its TCP connections (``ss``), or
    None where ``ss`` gives none."""
    try:
        out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True,
                             timeout=20, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    total, mine, found = 0, False, False
    for line in out.splitlines():
        if not line[:1].isspace():
            mine = f"pid={os.getpid()}," in line
            continue
        if mine:
            found = True
            total += sum(int(n) for n in re.findall(r"bytes_(?:sent|received):(\d+)", line))
    return total if found else None


_RELATIONSHIPS = ("Husband", "Not-in-family", "Own-child", "Unmarried", "Wife", "Other")


def _census_model(config: Any) -> Any:
    import tensorflow as tf
    fc = tf.feature_column
    age = fc.bucketized_column(fc.numeric_column("age"), [18, 25, 30, 35, 40, 45, 50, 55, 60, 65])
    occupation = fc.categorical_column_with_hash_bucket("occupation", 1000, dtype=tf.int64)
    country = fc.categorical_column_with_hash_bucket("native_country", 1000, dtype=tf.int64)
    relationship = fc.categorical_column_with_vocabulary_list("relationship", _RELATIONSHIPS)
    return tf.estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=[
            fc.crossed_column(["education", "occupation"], 10_000),
            fc.crossed_column([age, "education", "occupation"], 1_000_000),
            fc.crossed_column(["native_country", "occupation"], 10_000), country],
        linear_optimizer="Ftrl",
        dnn_feature_columns=[
            fc.embedding_column(occupation, 8), fc.embedding_column(relationship, 8),
            fc.indicator_column(fc.categorical_column_with_identity("education", 16)),
            fc.numeric_column("age"), fc.numeric_column("hours_per_week")],
        dnn_optimizer="Adagrad", dnn_hidden_units=[100, 70, 50, 25], config=config)


def _census_features(rng: Any, size: int) -> tuple[dict[str, Any], Any]:
    import numpy as np
    features = {
        "age": rng.integers(17, 90, (size, 1)).astype(np.float32),
        "hours_per_week": rng.integers(1, 99, (size, 1)).astype(np.float32),
        "education": rng.integers(0, 16, (size, 1)), "occupation": rng.integers(0, 400, (size, 1)),
        "native_country": rng.integers(0, 40, (size, 1)),
        "relationship": rng.choice(_RELATIONSHIPS, (size, 1))}
    return features, (features["education"] + features["occupation"]) % 2


def _model(spec: dict[str, Any], config: Any) -> Any:
    import tensorflow as tf
    if spec["model"] == "census":
        return _census_model(config)
    columns = tf.feature_column
    crossed = columns.crossed_column(["a", "b"], hash_bucket_size=spec["buckets"])
    ids = columns.categorical_column_with_identity("c", spec["vocab"])
    return tf.estimator.DNNLinearCombinedClassifier(
        linear_feature_columns=[crossed],
        dnn_feature_columns=[columns.embedding_column(ids, spec["dim"])],
        dnn_hidden_units=[64, 32], config=config)


def _config(spec: dict[str, Any]) -> Any:
    import estimator_dist
    import tensorflow as tf
    quiet: dict[str, Any] = {"model_dir": spec["model_dir"], "save_checkpoints_secs": None,
             "save_checkpoints_steps": None, "save_summary_steps": None,
             "log_step_count_steps": 10**9}
    system = spec["system"]
    if system == "plain":
        return tf.estimator.RunConfig(**quiet)
    if system in ("alone", "half"):
        return estimator_dist.make_run_config("default", **quiet)
    if system == "ps":
        return estimator_dist.make_run_config("parameter_server", **quiet)
    return estimator_dist.make_run_config(
        "multi_worker", sparse_gradients="dense" if system == "dense" else "auto", **quiet)


def run_task(spec: dict[str, Any]) -> None:
    """Trains one task of a case; prints its step walls and bytes as one JSON line."""
    import numpy as np
    import tensorflow as tf
    spec = dict(spec, model_dir=os.path.join(spec["work_dir"], spec["system"]))
    estimator = _model(spec, _config(spec))
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
    rng = np.random.default_rng(task.get("index", 0) + (task.get("type") == "chief") * 7)
    size = 16384
    side = int(spec["buckets"] ** 0.5) + 1
    features = {"a": rng.integers(0, side, (size, 1)), "b": rng.integers(0, side, (size, 1)),
                "c": rng.integers(0, spec["vocab"], (size, 1))}
    labels = ((features["a"] + features["c"]) % 2).astype(np.int64)
    if spec["model"] == "census":
        features, labels = _census_features(rng, size)

    def input_fn() -> Any:  # ignores input_context: each worker batches its own share
        data = tf.data.Dataset.from_tensor_slices((features, labels)).cache().repeat()
        return data.batch(spec["batch"], drop_remainder=True).prefetch(2)

    hook = scaling.step_hook(spec["steps"], trace=False)
    counted = _byte_hook(spec["warmup"])
    if spec["system"] in ("alone", "plain", "half"):
        estimator.train(input_fn, max_steps=spec["steps"], hooks=[hook, counted])
    else:
        tf.estimator.train_and_evaluate(
            estimator, tf.estimator.TrainSpec(input_fn, max_steps=spec["steps"],
                                              hooks=[hook, counted]),
            tf.estimator.EvalSpec(input_fn, steps=1, throttle_secs=10**6))
    print("TASK " + json.dumps({"walls": hook.walls, "steps_per_run": 1,
                                "bytes_per_step": counted.per_step()}), flush=True)


def _byte_hook(warmup: int) -> Any:
    """A hook counting this process's TCP bytes between its ``warmup``-th run and its
    last; ``per_step()`` gives them per run."""
    import tensorflow as tf

    class ByteHook(tf.estimator.SessionRunHook):
        def __init__(self) -> None:
            self._runs = 0
            # (runs, TCP bytes) at the end of the warm-up, and at the end.
            self._start: tuple[int, int | None] | None = None
            self._end: tuple[int, int | None] | None = None

        def after_run(self, run_context: Any, run_values: Any) -> None:
            self._runs += 1
            if self._runs == warmup:
                self._start = (self._runs, tcp_bytes())

        def end(self, session: Any) -> None:
            self._end = (self._runs, tcp_bytes())

        def per_step(self) -> float | None:
            if not self._start or not self._end:
                return None
            (start_runs, start_bytes), (end_runs, end_bytes) = self._start, self._end
            if start_bytes is None or end_bytes is None:
                return None
            steps = end_runs - start_runs
            return (end_bytes - start_bytes) / steps if steps > 0 else None

    return ByteHook()


# ---- the driver -----------------------------------------------------------------------

def run_case(kind: str, args: argparse.Namespace, work_dir: str) -> dict[str, Any]:
    spec = {"system": kind,
            "batch": args.batch if kind in ("alone", "plain") else args.batch // 2,
            "steps": args.steps, "warmup": args.warmup, "buckets": args.buckets,
            "vocab": args.vocab, "dim": args.dim, "model": args.model, "work_dir": work_dir}
    return scaling.run_tasks(*LAYOUTS[kind], spec, args.timeout,
                              script=__file__)[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--batch", type=int, default=512, help="global batch (even)")
    parser.add_argument("--buckets", type=int, default=1_000_000)
    parser.add_argument("--vocab", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=32)
    parser.add_argument("--model", choices=("wide", "census"), default="wide")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES),
                        help="cases to run (the 1 process baseline always runs)")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--task", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.task:
        return run_task(json.loads(args.task))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import _timing
    _timing.print_header()
    model = (f"crossed column {args.buckets:,} buckets ({args.buckets * 4 / 1e6:.1f} MB of "
             f"FTRL weights), embedding {args.vocab:,} x {args.dim} "
             f"({args.vocab * args.dim * 4 / 1e6:.1f} MB, Adagrad), DNN 64 -> 32"
             if args.model == "wide" else "census-style: FTRL over crossed columns of "
             "10,000, 1,000,000 and 10,000 buckets, Adagrad for DNN 100 -> 70 -> 50 -> 25")
    print(f"DNNLinearCombinedClassifier, {model}; global batch {args.batch}, {args.steps} "
          f"steps per case, first {args.warmup} left out; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    kinds = [k for k in CASES if k in args.cases or k == "alone"]
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    gflops: list[float] = []
    for round_index in range(args.rounds):
        gflops.append(_timing.sgemm_gflops(repeats=2))
        for kind in kinds:
            with tempfile.TemporaryDirectory() as work_dir:
                results[kind].append(run_case(kind, args, work_dir))
        line = ", ".join(
            f"{CASES[k]} {args.batch / scaling.step_seconds(r[-1], args.warmup):,.0f}"
            for k, r in results.items())
        print(f"  round {round_index + 1}: sgemm {gflops[-1]:.0f} GFLOP/s, load "
              f"{os.getloadavg()[0]:.1f}, examples/s: {line}", flush=True)
    base = [scaling.step_seconds(r, args.warmup) for r in results["alone"]]
    print(f"median over {args.rounds} rounds; x = median per-round ratio of examples/s to "
          f"{BASELINE}; bytes = the chief's TCP bytes sent + received per step")
    for kind, records in results.items():
        seconds = [scaling.step_seconds(r, args.warmup) for r in records]
        ratios = [b / s for b, s in zip(base, seconds)]
        sent = [r["bytes_per_step"] for r in records if r["bytes_per_step"] is not None]
        bytes_text = f"{statistics.median(sent):>13,.0f} bytes/step" if sent else "  bytes n/a"
        print(f"  {CASES[kind]:<36} {statistics.median(seconds) * 1000:7.1f} ms/step "
              f"{args.batch / statistics.median(seconds):>9,.0f} examples/s   "
              f"x{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"
              f" {bytes_text}", flush=True)
    print(f"  sgemm {_timing.SGEMM_SIZE}^3 float32: median {statistics.median(gflops):.0f} "
          f"GFLOP/s over the rounds; load average {os.getloadavg()[0]:.1f} at the end",
          flush=True)
    return None


if __name__ == "__main__":
    main()
