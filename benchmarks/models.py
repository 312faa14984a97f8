"""The package's model_fns against their usual peers, in one process, alternating.

    python benchmarks/models.py dense [--rounds 3] [--steps 2000] [--steps-per-run 20] [--xla]
    python benchmarks/models.py lstm [--rounds 3] [--steps 60] [--steps-per-run 20] [--xla]

dense: ``model_fns.dense_classifier_model_fn`` (64 -> 256 -> 256 -> 2, batch 128, Adam)
against the canned ``tf.estimator.DNNClassifier`` of the same shape and a plain TF1
model_fn (``tf.layers``, v1 Adam), one step per Session.run, and itself with
``steps_per_run``. lstm: ``model_fns.lstm_model_fn`` (T=50, dim 32, 128 units, batch 128,
Adam) against Keras ``LSTM`` ``fit`` and a plain TF1 ``BasicLSTMCell`` + ``dynamic_rnn``
model_fn; also its share of the sgemm ceiling, counting forward and backward matmul
FLOPs (3 x 2 x T x (dim + units) x 4 units per example).

Rates are steady state: Estimators after their first Session.run, Keras after its
first batch. The input is one cached array Dataset for all.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import tensorflow as tf

import _timing
import estimator_dist
from model_fns import dense_classifier_model_fn, lstm_model_fn

# A function that returns examples/s, timed round by round.
System = Callable[[], float]

v1 = tf.compat.v1
BATCH = 128
DENSE: dict[str, Any] = {"dim": 64, "hidden_units": [256, 256], "num_classes": 2}
LSTM: dict[str, Any] = {"time": 50, "dim": 32, "num_units": 128, "num_classes": 2}
TINY: dict[str, dict[str, Any]] = {"dense": {"dim": 4, "hidden_units": [8]},
                                   "lstm": {"time": 3, "dim": 2, "num_units": 4}}


def plain_dense_model_fn(features: dict[str, Any], labels: Any, mode: str,
                         params: dict[str, Any]) -> Any:
    """A TF1 model_fn: tf.layers MLP, tf.losses cross-entropy, v1 Adam."""
    net = features["x"]
    for units in params["hidden_units"]:
        net = v1.layers.dense(net, units, activation=tf.nn.relu)
    return _plain_spec(mode, v1.layers.dense(net, params["num_classes"]), labels)


def plain_lstm_model_fn(features: dict[str, Any], labels: Any, mode: str,
                        params: dict[str, Any]) -> Any:
    """A TF1 model_fn: BasicLSTMCell + dynamic_rnn, last output, dense logits, v1 Adam."""
    cell = v1.nn.rnn_cell.BasicLSTMCell(params["num_units"])
    outputs, _ = v1.nn.dynamic_rnn(cell, features["x"], dtype=tf.float32)
    return _plain_spec(mode, v1.layers.dense(outputs[:, -1], params["num_classes"]), labels)


def _plain_spec(mode: str, logits: Any, labels: Any) -> Any:
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.AdamOptimizer(1e-3).minimize(loss, v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _estimator_system(model_fn: Callable[..., Any], params: dict[str, Any],
                      input_fn: Callable[[], Any], steps: int, steps_per_run: int = 1) -> System:
    estimator = estimator_dist.make_estimator(model_fn, _timing.quiet_config(), params,
                                              steps_per_run=steps_per_run)
    return lambda: _timing.estimator_rate(estimator, input_fn, steps, BATCH)


def _canned_system(input_fn: Callable[[], Any], steps: int) -> System:
    columns = [tf.feature_column.numeric_column("x", shape=[DENSE["dim"]])]
    estimator = tf.estimator.DNNClassifier(
        DENSE["hidden_units"], columns, n_classes=DENSE["num_classes"], optimizer="Adam",
        config=_timing.quiet_config())
    return lambda: _timing.estimator_rate(estimator, input_fn, steps, BATCH)


class _KerasRate(tf.keras.callbacks.Callback):
    def on_train_batch_end(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        if batch == 0:
            self.start = time.perf_counter()
        self.batches = batch

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self.rate = self.batches * BATCH / (time.perf_counter() - self.start)


def _keras_system(input_fn: Callable[[], Any], steps: int) -> System:
    model = tf.keras.Sequential([
        tf.keras.Input((LSTM["time"], LSTM["dim"])),
        tf.keras.layers.LSTM(LSTM["num_units"]),
        tf.keras.layers.Dense(LSTM["num_classes"])])
    model.compile(tf.keras.optimizers.Adam(1e-3),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    data = input_fn().map(lambda features, label: (features["x"], label))

    def measure() -> float:
        rate = _KerasRate()
        model.fit(data, steps_per_epoch=steps + 1, epochs=1, verbose=0, callbacks=[rate])
        return rate.rate

    return measure


def _with_xla(model_fn: Callable[..., Any]) -> Callable[..., Any]:
    """``model_fn`` with every op it builds (forward, backward, optimizer) in one XLA
    cluster (``tf.xla.experimental.jit_scope``), compiled for the CPU."""

    def xla_model_fn(features: dict[str, Any], labels: Any, mode: str,
                     params: dict[str, Any]) -> Any:
        with tf.xla.experimental.jit_scope():
            return model_fn(features, labels, mode, params)

    return xla_model_fn


def _systems(name: str, peer: dict[str, System], plain_model_fn: Callable[..., Any],
             model_fn: Callable[..., Any], params: dict[str, Any], input_fn: Callable[[], Any],
             args: argparse.Namespace) -> dict[str, System]:
    """The peer, the plain TF1 model_fn, and the package's model_fn at K=1 and K (and
    under XLA with ``--xla``)."""
    k = args.steps_per_run
    systems = {
        **peer,
        "plain TF1 model_fn": _estimator_system(plain_model_fn, params, input_fn, args.steps),
        f"{name} model_fn": _estimator_system(model_fn, params, input_fn, args.steps),
        f"{name} model_fn, K={k}": _estimator_system(model_fn, params, input_fn, args.steps, k),
    }
    if args.xla:
        systems[f"{name} model_fn, XLA"] = _estimator_system(_with_xla(model_fn), params,
                                                             input_fn, args.steps)
    return systems


def dense_systems(args: argparse.Namespace) -> dict[str, System]:
    input_fn = _timing.blobs_input_fn([DENSE["dim"]], BATCH)
    params = {"hidden_units": DENSE["hidden_units"], "num_classes": DENSE["num_classes"],
              "learning_rate": 1e-3}
    peer = {"canned DNNClassifier": _canned_system(input_fn, args.steps)}
    return _systems("dense", peer, plain_dense_model_fn, dense_classifier_model_fn, params,
                    input_fn, args)


def lstm_systems(args: argparse.Namespace) -> dict[str, System]:
    input_fn = _timing.blobs_input_fn([LSTM["time"], LSTM["dim"]], BATCH)
    params = {"num_units": LSTM["num_units"], "num_classes": LSTM["num_classes"],
              "learning_rate": 1e-3}
    peer = {"Keras LSTM fit": _keras_system(input_fn, args.steps)}
    return _systems("lstm", peer, plain_lstm_model_fn, lstm_model_fn, params, input_fn, args)


def lstm_flops_per_example() -> int:
    """Matmul FLOPs of one example's forward and backward pass (backward = 2 x forward)."""
    time_steps, dim, units = LSTM["time"], LSTM["dim"], LSTM["num_units"]
    return 3 * 2 * time_steps * (dim + units) * 4 * units


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", choices=["dense", "lstm"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=None,
                        help="steps per round (default: dense 2000, lstm 60)")
    parser.add_argument("--steps-per-run", type=int, default=20)
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (smoke test)")
    parser.add_argument("--xla", action="store_true",
                        help="also the package's model_fn compiled by XLA (jit_scope)")
    args = parser.parse_args(argv)
    if args.tiny:
        (DENSE if args.model == "dense" else LSTM).update(TINY[args.model])
    args.steps = args.steps or {"dense": 2000, "lstm": 60}[args.model]
    _timing.print_header()
    systems = (dense_systems if args.model == "dense" else lstm_systems)(args)
    print(f"{args.model}, batch {BATCH}, {args.steps} steps per round:", flush=True)
    rates, gflops = _timing.alternate(systems, args.rounds, baseline=next(iter(systems)))
    if args.model == "lstm":
        for name, values in rates.items():
            share = statistics.median(values) * lstm_flops_per_example() / 1e9 / gflops
            print(f"  {name:<28} {share:.0%} of the sgemm ceiling")


if __name__ == "__main__":
    main()
