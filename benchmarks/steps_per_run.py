"""Several training steps per Session.run: a user's plain model_fn at K = 1, 10, 100.

    python benchmarks/steps_per_run.py [--rounds 3] [--steps 2000] [--v1-behavior]

The model_fn is what a legacy user writes: ``tf.layers`` dense 64 -> 256 -> 256 -> 2,
``tf.losses`` cross-entropy, v1 Adam, batch 128, one-device Estimator built by
``estimator_dist.make_estimator(..., steps_per_run=K)``. Each round trains every K
``--steps`` steps in turn; rates are steady state (after the first Session.run).
``--v1-behavior`` calls ``tf.compat.v1.disable_v2_behavior()`` first, as most legacy
scripts do.
"""
from __future__ import annotations

import argparse
import sys
from typing import Callable

if "--v1-behavior" in sys.argv:
    import tensorflow as tf
    tf.compat.v1.disable_v2_behavior()

import _timing  # noqa: E402
import estimator_dist  # noqa: E402

BATCH = 128


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--hidden-units", type=int, nargs="+", default=[256, 256])
    parser.add_argument("--steps-per-run", type=int, nargs="+", default=[1, 10, 100])
    parser.add_argument("--v1-behavior", action="store_true")
    args = parser.parse_args(argv)
    _timing.print_header()
    input_fn = _timing.blobs_input_fn([64], BATCH)
    params = {"hidden_units": args.hidden_units}
    systems: dict[str, Callable[..., float]] = {}  # Each takes its estimator as a default.
    for k in args.steps_per_run:
        estimator = estimator_dist.make_estimator(
            _timing.plain_mlp_model_fn, _timing.quiet_config(), params, steps_per_run=k)
        systems[f"steps_per_run={k}"] = (
            lambda e=estimator: _timing.estimator_rate(e, input_fn, args.steps, BATCH))
    print(f"plain model_fn 64 -> {args.hidden_units} -> 2, batch {BATCH}, {args.steps} steps "
          "per round:")
    _timing.alternate(systems, args.rounds, baseline=next(iter(systems)))


if __name__ == "__main__":
    main()
