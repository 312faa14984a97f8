"""Mixed bfloat16 against float32 for unchanged model_fns, on a CPU with bfloat16 units.

    python benchmarks/precision.py [--rounds 3] [--steps 30] [--models mlp dense lstm]

Each model_fn runs in two Estimators, ``make_run_config(mixed_precision=None)`` and
``make_run_config(mixed_precision="bfloat16")``, alternating round by round; nothing in
the model_fn changes. The models:

* ``mlp``: a plain ``tf.compat.v1.layers`` model_fn 1024 -> 2048 -> 2048 -> 2048 -> 10,
  batch 256, v1 Adam (the issue's program);
* ``dense``: ``model_fns.dense_classifier_model_fn``, 64 -> [256, 256] -> 2, batch 128;
* ``lstm``: ``model_fns.lstm_model_fn``, T=50, dim 32, 128 units, batch 128.

Each round also measures the 2048³ matmul in float32 (sgemm) and bfloat16: the ceilings
of the same run. Rates are steady state (after the first Session.run); the report gives
medians and the median of the per-round ratios to float32. On a CPU without bfloat16
units, where ``make_run_config`` refuses mixed bfloat16, it measures the two ceilings
only.
"""
from __future__ import annotations

import argparse
import statistics
from typing import Any, Callable

import tensorflow as tf

import _timing
from estimator_dist import precision
from model_fns import dense_classifier_model_fn, lstm_model_fn

# model_fn, params, input shape (per example), batch.
Model = tuple[Callable[..., Any], dict[str, Any], list[int], int]

v1 = tf.compat.v1
MLP: dict[str, Any] = {"dim": 1024, "hidden_units": [2048, 2048, 2048], "num_classes": 10,
                       "batch": 256}
TINY_MLP: dict[str, Any] = {"dim": 16, "hidden_units": [32], "num_classes": 10, "batch": 8}
PRECISIONS = {"float32": None, "bfloat16": "bfloat16"}


def mlp_model_fn(features: dict[str, Any], labels: Any, mode: str,
                 params: dict[str, Any]) -> Any:
    """What a legacy user writes: tf.layers MLP, tf.losses cross-entropy, v1 Adam."""
    net = features["x"]
    for units in params["hidden_units"]:
        net = v1.layers.dense(net, units, activation=tf.nn.relu)
    logits = v1.layers.dense(net, params["num_classes"])
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.AdamOptimizer(1e-3).minimize(loss, v1.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def _models(tiny: bool) -> dict[str, Model]:
    """name -> (model_fn, params, input shape, batch)."""
    mlp = TINY_MLP if tiny else MLP
    dense = {"hidden_units": [8] if tiny else [256, 256], "num_classes": 2,
             "learning_rate": 1e-3}
    lstm = {"num_units": 4 if tiny else 128, "num_classes": 2, "learning_rate": 1e-3}
    return {
        "mlp": (mlp_model_fn, mlp, [mlp["dim"]], mlp["batch"]),
        "dense": (dense_classifier_model_fn, dense, [4 if tiny else 64], 128),
        "lstm": (lstm_model_fn, lstm, [3, 2] if tiny else [50, 32], 128),
    }


def _systems(name: str, model: Model, steps: int) -> dict[str, Callable[..., float]]:
    model_fn, params, shape, batch = model
    input_fn = _timing.blobs_input_fn(shape, batch, num_classes=params["num_classes"])
    systems: dict[str, Callable[..., float]] = {}  # Each takes its estimator as a default.
    for label, mixed in PRECISIONS.items():
        estimator = tf.estimator.Estimator(
            model_fn, config=_timing.quiet_config(mixed_precision=mixed), params=params)
        systems[f"{name} {label}"] = (
            lambda e=estimator: _timing.estimator_rate(e, input_fn, steps, batch))
    return systems


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30, help="training steps per round")
    parser.add_argument("--models", nargs="+", choices=("mlp", "dense", "lstm"),
                        default=["mlp", "dense", "lstm"])
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (smoke test)")
    args = parser.parse_args(argv)
    _timing.print_header()
    if not precision.bf16_cpu_features():
        _ceilings_only(args.rounds)
        return
    models = _models(args.tiny)
    groups = {name: _systems(name, models[name], args.steps) for name in args.models}
    rates: dict[str, list[float]] = {name: [] for systems in groups.values() for name in systems}
    ceilings: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    for round_index in range(args.rounds):
        for dtype in ceilings:
            ceilings[dtype].append(_timing.matmul_gflops(tf.as_dtype(dtype), repeats=2))
        for systems in groups.values():
            for name, measure in systems.items():
                rates[name].append(measure())
        line = ", ".join(f"{name} {values[-1]:,.0f}" for name, values in rates.items())
        print(f"  round {round_index + 1}: matmul {ceilings['float32'][-1]:.0f} / "
              f"{ceilings['bfloat16'][-1]:.0f} GFLOP/s, {line}", flush=True)
    for name, systems in groups.items():
        print(f"{name}, {args.steps} steps per round:")
        _timing.report({n: rates[n] for n in systems}, baseline=f"{name} float32")
    _print_ceilings(ceilings)


def _ceilings_only(rounds: int) -> None:
    """On a CPU without bfloat16 units, where ``make_run_config`` refuses mixed bfloat16:
    the matmul ceilings that show why."""
    print("no bfloat16 units on this CPU (neither avx512_bf16 nor amx_bf16): "
          "mixed_precision='bfloat16' is refused here; the matmul ceilings say why", flush=True)
    ceilings: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    for _ in range(rounds):
        for dtype, values in ceilings.items():
            values.append(_timing.matmul_gflops(tf.as_dtype(dtype), repeats=2))
    _print_ceilings(ceilings)
    ratios = [b / f for f, b in zip(ceilings["float32"], ceilings["bfloat16"])]
    print(f"  bfloat16 / float32: median x{statistics.median(ratios):.2f} of the per-round "
          "ratios", flush=True)


def _print_ceilings(ceilings: dict[str, list[float]]) -> None:
    for dtype, values in ceilings.items():
        print(f"  matmul {_timing.SGEMM_SIZE}^3 {dtype}: median {statistics.median(values):.0f} "
              "GFLOP/s over the rounds", flush=True)


if __name__ == "__main__":
    main()
