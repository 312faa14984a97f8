"""Latency per chunk of the streaming LSTM SavedModel beside a Keras LSTM's, in one
process, alternating.

    python benchmarks/lstm_streaming.py [--rounds 3] [--calls 200] [--chunk 10] [--batch 1]

``lstm_model_fn``: dim 32, 128 units, 2 classes, trained one step and exported as the
CLI exports it (``serving_default``: ``x`` [batch, time, dim] with a varying time axis,
``state_c``, ``state_h``). Keras: ``LSTM(128, return_state=True)`` + ``Dense(2)`` on the
last output, saved with a signature of the same inputs. Each call runs one chunk of
``--chunk`` steps from the state the previous call returned, as a streaming client
does. Reported: each round's median milliseconds per call, the medians over the rounds
and the median per-round ratio to Keras.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Sequence

import numpy as np
import tensorflow as tf

import _timing
import estimator_dist
from estimator_dist.export import export_saved_model
from model_fns import lstm_model_fn

DIM, UNITS, CLASSES = 32, 128, 2


def _package_signature() -> Any:
    model_dir = _timing.scratch_dir()
    params = {"num_units": UNITS, "num_classes": CLASSES, "learning_rate": 1e-3}
    estimator = tf.estimator.Estimator(
        lstm_model_fn, params=params,
        config=estimator_dist.make_run_config("default", model_dir=model_dir))
    x = np.random.RandomState(0).randn(8, 5, DIM).astype(np.float32)
    estimator.train(lambda: tf.data.Dataset.from_tensors(({"x": x}, np.zeros(8, np.int64))),
                    max_steps=1)
    state = [None, UNITS]
    path = export_saved_model(estimator, model_dir + "/export",
                              {"x": [None, None, DIM], "state_c": state, "state_h": state})
    return tf.saved_model.load(path).signatures["serving_default"]


def _keras_signature() -> Any:
    x = tf.keras.Input([None, DIM])
    state_c, state_h = tf.keras.Input([UNITS]), tf.keras.Input([UNITS])
    outputs, h, c = tf.keras.layers.LSTM(UNITS, return_state=True)(
        x, initial_state=[state_h, state_c])
    model = tf.keras.Model([x, state_c, state_h], [tf.keras.layers.Dense(CLASSES)(outputs), c, h])

    @tf.function(input_signature=[tf.TensorSpec([None, None, DIM]),
                                  tf.TensorSpec([None, UNITS]), tf.TensorSpec([None, UNITS])])
    def serve(x: tf.Tensor, state_c: tf.Tensor, state_h: tf.Tensor) -> dict[str, tf.Tensor]:
        logits, c, h = model([x, state_c, state_h])
        return {"logits": logits, "state_c": c, "state_h": h}

    path = _timing.scratch_dir()
    tf.saved_model.save(model, path, signatures=serve)
    return tf.saved_model.load(path).signatures["serving_default"]


def _latency(signature: Any, chunks: Sequence[tf.Tensor]) -> float:
    """Median milliseconds per call over ``chunks``, the state carried from call to call."""
    state = tf.zeros([chunks[0].shape[0], UNITS])
    state_c = state_h = state
    seconds: list[float] = []
    for chunk in chunks:
        start = time.perf_counter()
        out = signature(x=chunk, state_c=state_c, state_h=state_h)
        state_c, state_h = out["state_c"], out["state_h"]
        seconds.append(time.perf_counter() - start)
    return 1000 * statistics.median(seconds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--chunk", type=int, default=10, help="time steps per call")
    parser.add_argument("--batch", type=int, default=1, help="streams per call")
    args = parser.parse_args(argv)
    _timing.print_header()
    systems = {"Keras LSTM": _keras_signature(), "lstm_model_fn export": _package_signature()}
    rng = np.random.RandomState(1)
    chunks = [tf.constant(rng.randn(args.batch, args.chunk, DIM).astype(np.float32))
              for _ in range(args.calls)]
    for signature in systems.values():
        _latency(signature, chunks[:5])  # warm-up
    times: dict[str, list[float]] = {name: [] for name in systems}
    for round_index in range(args.rounds):
        for name, signature in systems.items():
            times[name].append(_latency(signature, chunks))
        line = ", ".join(f"{name} {values[-1]:.3f} ms" for name, values in times.items())
        print(f"  round {round_index + 1}: {line}", flush=True)
    for name, values in times.items():
        ratios = [v / k for v, k in zip(values, times["Keras LSTM"])]
        print(f"  {name:<24} {statistics.median(values):.3f} ms per chunk   "
              f"x{statistics.median(ratios):.2f} of Keras LSTM's time", flush=True)


if __name__ == "__main__":
    main()
