"""What evaluating on one device costs against evaluating on the mirrored replicas.

    python benchmarks/exact_eval.py [--rounds 5] [--examples 65536] [--batch-size 1024]

``make_run_config("mirrored")`` evaluates on one device (``eval_distribute=None``), which
counts every example exactly once; TensorFlow's own wiring evaluates on the replicas
(the strategy as ``eval_distribute``) and drops a short last batch in some runs. This
times one ``estimator.evaluate()`` over the whole eval set (graph, session, restore and
all steps: what a user waits for) of ``model_fns.dense_classifier_model_fn``
(64 -> 256 -> 256 -> 2) trained for one step over 2 logical CPU replicas, both ways in
every round, and prints the median seconds of each and the median ratio.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import estimator_dist  # noqa: E402
from input_fns import from_arrays  # noqa: E402
from model_fns import dense_classifier_model_fn  # noqa: E402

_PARAMS = {"hidden_units": [256, 256], "num_classes": 2, "learning_rate": 0.001}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--examples", type=int, default=65536)
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args(argv)
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    config = estimator_dist.make_run_config("mirrored", num_replicas=2)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.examples, 64)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    eval_fn = from_arrays({"x": x}, y, batch_size=args.batch_size, shuffle=False,
                          num_epochs=1, drop_remainder=False)
    configs = {"one device": config,
               # TensorFlow's own replace: make_run_config's refuses a strategy key.
               "replicas": tf.estimator.RunConfig.replace(
                   config, eval_distribute=config.train_distribute)}
    seconds: dict[str, list[float]] = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as model_dir:
        trained = tf.estimator.Estimator(dense_classifier_model_fn,
                                         config=config.replace(model_dir=model_dir),
                                         params=_PARAMS)
        trained.train(from_arrays({"x": x}, y, batch_size=128, seed=0), max_steps=1)
        for _ in range(args.rounds):
            for name, run_config in configs.items():
                estimator = tf.estimator.Estimator(
                    dense_classifier_model_fn, config=run_config.replace(model_dir=model_dir),
                    params=_PARAMS)
                start = time.perf_counter()
                estimator.evaluate(eval_fn)
                seconds[name].append(time.perf_counter() - start)
    ratios = [o / r for o, r in zip(seconds["one device"], seconds["replicas"])]
    print(f"evaluate() of {args.examples} examples at batch {args.batch_size}, mirrored-2 "
          f"model: median seconds over {args.rounds} rounds")
    for name, values in seconds.items():
        print(f"  {name:<11} {statistics.median(values):7.2f} s")
    print(f"  one device / replicas: x{statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
