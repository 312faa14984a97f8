"""Train/evaluate cycles of an Estimator in a process of its own, reporting what stays
alive after each cycle.

    python -m tests.programs.custom_gradient_probe {plain,mended} MODEL CYCLES \
        {graphs,rss} MODEL_DIR

``plain``: a plain ``tf.estimator.Estimator`` and RunConfig, no mend but those that give
TensorFlow 2.16+ ``tf.estimator`` back. ``mended``: the config from
``estimator_dist.make_run_config("default")``.
MODEL: ``custom_gradient`` (``tf1_models.custom_gradient_model_fn``) or ``lstm``
(``model_fns.lstm_model_fn``). Each cycle trains 20 steps and evaluates 2, then prints
``cycle N graphs G registry R`` (``graphs``: after ``gc.collect()``, the live
``tf.Graph`` objects and TensorFlow's ``CustomGradient-*`` registry entries) or
``cycle N rss MB`` (``rss``: the resident size, with no collection forced).
"""
import gc
import sys

# tf.estimator on TensorFlow 2.16+: the import-scope mends only (nothing on 2.15); no
# other mend is installed without make_run_config.
import estimator_dist  # noqa: F401  (imported for its mends)
import tensorflow as tf
from tensorflow.python.framework import ops

from model_fns import lstm_model_fn
from tests.programs import tf1_models

_MODELS = {
    "custom_gradient": (tf1_models.custom_gradient_model_fn, {"learning_rate": 0.01}, None),
    "lstm": (lstm_model_fn, {"learning_rate": 0.01, "num_units": 16, "num_classes": 3}, 6),
}


def _estimator(how, model_fn, params, model_dir):
    settings = {"model_dir": model_dir, "save_checkpoints_steps": None,
                "log_step_count_steps": None}
    if how == "mended":
        import estimator_dist

        config = estimator_dist.make_run_config("default", **settings)
    else:
        config = tf.estimator.RunConfig(**settings)
    return tf.estimator.Estimator(model_fn, config=config, params=params)


def _rss_mb():
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * 4096 / 2 ** 20


def _report(cycle, measure):
    if measure == "rss":
        return f"cycle {cycle} rss {_rss_mb():.0f}"
    gc.collect()
    graphs = sum(isinstance(o, tf.Graph) for o in gc.get_objects())
    entries = sum(name.startswith("CustomGradient-") for name in ops.gradient_registry.list())
    return f"cycle {cycle} graphs {graphs} registry {entries}"


def main(how, model, cycles, measure, model_dir):
    tf.get_logger().setLevel("ERROR")
    model_fn, params, time_steps = _MODELS[model]
    x, y = tf1_models.classification_data(time_steps=time_steps)
    input_fn = tf1_models.dataset_input_fn(x, y, 32)
    estimator = _estimator(how, model_fn, params, model_dir)
    for cycle in range(int(cycles)):
        estimator.train(input_fn, steps=20)
        estimator.evaluate(input_fn, steps=2)
        print(_report(cycle, measure), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
