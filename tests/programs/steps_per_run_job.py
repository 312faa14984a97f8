"""Trains ``tf1_models.mlp_model_fn`` with steps_per_run; prints the outcome as JSON.

    python -m tests.programs.steps_per_run_job STRATEGY MODEL_DIR K [K ...]
        [--v1-behavior] [--max-steps N] [--save-checkpoints-steps N]

One run per K, each in ``MODEL_DIR/k{K}``, through ``make_run_config(..., steps_per_run=K)``
and ``make_estimator``. "multi_worker" runs ``train_and_evaluate`` (TF_CONFIG set by the
caller). The last line of stdout is ``RESULT {json}``: per K the global step, the steps
of the checkpoints kept, the summary steps written and the weights.
"""
import argparse
import glob
import json
import os
import sys

if "--v1-behavior" in sys.argv:
    import tensorflow.compat.v1 as tf1
    tf1.disable_v2_behavior()

import tensorflow as tf  # noqa: E402

import estimator_dist  # noqa: E402
from tests.programs import tf1_models  # noqa: E402

GLOBAL_BATCH = 16


def _summary_steps(model_dir):
    steps = set()
    for path in glob.glob(os.path.join(model_dir, "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            if any(value.tag == "mean_logit" for value in event.summary.value):
                steps.add(int(event.step))
    return sorted(steps)


def train(strategy, model_dir, steps_per_run, max_steps, checkpoint_steps):
    options = {"num_replicas": 2} if strategy == "mirrored" else {}
    if strategy == "multi_worker":
        options["collective_timeout"] = 60
    config = estimator_dist.make_run_config(
        strategy, model_dir=model_dir, save_checkpoints_steps=checkpoint_steps,
        save_summary_steps=checkpoint_steps, keep_checkpoint_max=100,
        steps_per_run=steps_per_run, **options)
    estimator = estimator_dist.make_estimator(tf1_models.mlp_model_fn, config,
                                              {"learning_rate": 0.1})
    x, y = tf1_models.classification_data()
    input_fn = tf1_models.context_input_fn(x, y, GLOBAL_BATCH)
    tf1_models.train(estimator, input_fn, max_steps, strategy, eval_steps=2)
    state = tf.train.get_checkpoint_state(model_dir)
    return {
        "estimator": type(estimator).__name__,
        "global_step": int(estimator.get_variable_value("global_step")),
        "checkpoints": sorted(int(p.rsplit("-", 1)[1]) for p in state.all_model_checkpoint_paths),
        "summary_steps": _summary_steps(model_dir),
        "weights": {name: estimator.get_variable_value(name).tolist()
                    for name in estimator.get_variable_names() if name.endswith("kernel")},
    }


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("strategy")
    parser.add_argument("model_dir")
    parser.add_argument("steps_per_run", type=int, nargs="+")
    parser.add_argument("--v1-behavior", action="store_true")
    parser.add_argument("--max-steps", type=int, default=23)
    parser.add_argument("--save-checkpoints-steps", type=int, default=5)
    args = parser.parse_args(argv)
    if args.strategy == "mirrored":
        estimator_dist.setup_cpu_replicas(2)
    results = {k: train(args.strategy, os.path.join(args.model_dir, f"k{k}"), k,
                        args.max_steps, args.save_checkpoints_steps)
               for k in args.steps_per_run}
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    main()
