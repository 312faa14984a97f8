"""CPU mirrored: the package's ``make_run_config("mirrored")`` against plain TensorFlow.

    python benchmarks/cpu_mirrored.py [--rounds 3] [--behaviours tf1 tf2]
                                      [--models gru dense] [--systems ...] [--tiny]

Every case trains the same legacy model_fn at the same global batch, in a process of
its own (CPU devices are fixed when the TensorFlow runtime starts, and the behaviour
when the program starts):

* ``package`` — ``estimator_dist.make_run_config("mirrored", num_replicas=2)``.
* ``plain`` — what a TF user writes: ``RunConfig(session_config=ConfigProto(
  device_count={"CPU": 2}), train_distribute=MirroredStrategy(["/cpu:0", "/cpu:1"]))``
  with the strategy's default cross-device ops.
* ``one`` — a plain ``RunConfig()``: one device, the whole global batch.

Models: ``gru`` (``MultiRNNCell`` of two ``GRUCell``s under ``dynamic_rnn``, the last
output into a dense layer) and ``dense`` (a ``tf.layers`` MLP), both with
``tf.losses`` cross-entropy and v1 Adam; the input_fn takes ``input_context`` and
batches the per-replica share of the global batch. Under ``tf1`` behaviour the process
calls ``tf.compat.v1.disable_v2_behavior()`` first.

The systems alternate within every round (behaviour by behaviour); each process
reports steps/s and examples/s after its first step (``_timing.RateHook``), and the
report gives medians over the rounds and the median per-round ratio to ``plain``. A
case that does not finish within ``--timeout`` seconds is reported as a hang.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Callable, Mapping, Sequence

# Examples/s and steps/s per model, as a worker prints them.
Rates = dict[str, dict[str, float]]

SYSTEMS = ("package", "plain", "one")
MODELS = ("gru", "dense")
SIZES = {  # (time steps, features, units, global batch, steps) per model
    "full": {"gru": (50, 32, 128, 128, 40), "dense": (64, 256, 256, 128, 300)},
    "tiny": {"gru": (5, 4, 8, 8, 4), "dense": (4, 8, 8, 8, 4)},
}


def _model_fn(features: dict[str, Any], labels: Any, mode: str, params: dict[str, Any]) -> Any:
    import tensorflow as tf
    v1 = tf.compat.v1
    net = features["x"]
    init = v1.glorot_uniform_initializer(seed=1)
    if params["model"] == "gru":
        cells = [v1.nn.rnn_cell.GRUCell(params["units"], kernel_initializer=init)
                 for _ in range(2)]
        outputs, _ = v1.nn.dynamic_rnn(v1.nn.rnn_cell.MultiRNNCell(cells), net,
                                       dtype=tf.float32)
        net = outputs[:, -1]
    else:
        for _ in range(2):
            net = v1.layers.dense(net, params["units"], tf.nn.relu, kernel_initializer=init)
    logits = v1.layers.dense(net, 2, kernel_initializer=init)
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.AdamOptimizer(1e-3).minimize(loss, v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn(model: str, size: str) -> Callable[..., Any]:
    import numpy as np
    import tensorflow as tf
    steps, dim, _, global_batch, _ = SIZES[size][model]
    shape = (steps, dim) if model == "gru" else (steps,)
    x = np.random.RandomState(0).randn(1024, *shape).astype(np.float32)
    y = (x.reshape(1024, -1)[:, 0] > 0).astype(np.int64)

    def input_fn(input_context: Any = None) -> Any:
        batch = (input_context.get_per_replica_batch_size(global_batch)
                 if input_context else global_batch)
        data = tf.data.Dataset.from_tensor_slices(({"x": x}, y)).cache().repeat()
        return data.batch(batch, drop_remainder=True).prefetch(2)

    return input_fn


def _run_config(system: str, model_dir: str) -> Any:
    import tensorflow as tf
    quiet: dict[str, Any] = {"model_dir": model_dir, "save_checkpoints_secs": None,
             "save_checkpoints_steps": None, "save_summary_steps": 10**9,
             "log_step_count_steps": 10**9}
    if system == "package":
        import estimator_dist
        return estimator_dist.make_run_config("mirrored", num_replicas=2, **quiet)
    if system == "plain":
        return tf.estimator.RunConfig(
            session_config=tf.compat.v1.ConfigProto(device_count={"CPU": 2}),
            train_distribute=tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]), **quiet)
    return tf.estimator.RunConfig(**quiet)


def worker(system: str, behaviour: str, models: Sequence[str], size: str) -> None:
    """Trains each model once under ``system``; prints one JSON line of rates."""
    import tensorflow as tf
    if behaviour == "tf1":
        tf.compat.v1.disable_v2_behavior()
    import estimator_dist  # noqa: F401  (tf.estimator on TF 2.16+)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _timing
    rates: Rates = {}
    for model in models:
        _, _, units, global_batch, steps = SIZES[size][model]
        with tempfile.TemporaryDirectory() as model_dir:
            estimator = tf.estimator.Estimator(
                _model_fn, config=_run_config(system, model_dir),
                params={"model": model, "units": units})
            rate = _timing.estimator_rate(estimator, _input_fn(model, size), steps,
                                          global_batch)
        rates[model] = {"examples": rate, "steps": rate / global_batch}
    print("RATES " + json.dumps(rates), flush=True)


def _measure(system: str, behaviour: str, models: Sequence[str], size: str,
             timeout: float) -> Rates | None:
    command = [sys.executable, os.path.abspath(__file__), "--worker", system, behaviour,
               "--models", *models] + (["--tiny"] if size == "tiny" else [])
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    for line in result.stdout.splitlines():
        if line.startswith("RATES "):
            return json.loads(line[len("RATES "):])
    raise RuntimeError(f"{system} {behaviour} failed:\n{result.stderr[-3000:]}")


def _load() -> float:
    return os.getloadavg()[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--behaviours", nargs="+", default=["tf1", "tf2"])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--tiny", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--worker", nargs=2, metavar=("SYSTEM", "BEHAVIOUR"))
    args = parser.parse_args(argv)
    size = "tiny" if args.tiny else "full"
    if args.worker:
        system, behaviour = args.worker
        worker(system, behaviour, args.models, size)
        return
    import tensorflow as tf
    print(f"machine: {os.cpu_count()} CPU cores; TensorFlow {tf.__version__}")
    print("command: python " + " ".join(sys.argv), flush=True)
    for model in args.models:
        print(f"  {model}: (time steps or features, ..., global batch, steps) = "
              f"{SIZES[size][model]}")
    for behaviour in args.behaviours:
        results: dict[str, list[Rates | None]] = {system: [] for system in args.systems}
        loads: list[float] = []
        for round_index in range(args.rounds):
            loads.append(_load())
            for system in args.systems:
                results[system].append(
                    _measure(system, behaviour, args.models, size, args.timeout))
            line = ", ".join(
                f"{system} " + ("hang" if r[-1] is None else " ".join(
                    f"{m} {r[-1][m]['steps']:.2f}" for m in args.models))
                for system, r in results.items())
            print(f"  {behaviour} round {round_index + 1} (load {loads[-1]:.1f}), "
                  f"steps/s: {line}", flush=True)
        _report(behaviour, results, args.models, loads)


def _report(behaviour: str, results: Mapping[str, Sequence[Rates | None]],
            models: Sequence[str], loads: Sequence[float]) -> None:
    print(f"{behaviour} behaviour, median over rounds (load {min(loads):.1f}-"
          f"{max(loads):.1f}):")
    for model in models:
        for system, runs in results.items():
            finished = [r for r in runs if r is not None]
            if len(finished) < len(runs):
                print(f"  {model:<6} {system:<8} hang (no result within the timeout)")
                continue
            steps = statistics.median(r[model]["steps"] for r in finished)
            examples = statistics.median(r[model]["examples"] for r in finished)
            ratio = ""
            plain = [p for p in results.get("plain", ()) if p is not None]
            if "plain" in results and len(plain) == len(results["plain"]):
                ratio = "   x{:.2f} of plain".format(statistics.median(
                    r[model]["steps"] / p[model]["steps"]
                    for r, p in zip(finished, plain)))
            print(f"  {model:<6} {system:<8} {steps:8.2f} steps/s {examples:10,.0f} "
                  f"examples/s{ratio}", flush=True)


if __name__ == "__main__":
    main()
