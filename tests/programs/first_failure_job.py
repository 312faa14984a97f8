"""A user's program under the launcher whose chief (worker 0 without one) fails first.

    python -m tests.programs.first_failure_job KIND STRATEGY MODEL_DIR

KIND: "late_config" (the chief runs a TensorFlow op before ``make_run_config``),
"rendezvous" (its rendezvous times out: its peers start 60 s late), "input_fn" or
"model_fn" (its own raises), "lost_peer" (the last worker kills itself with SIGKILL once
the cluster has formed). The other tasks wait for it (or for the lost peer) until the
launcher stops them. STRATEGY: "multi_worker" or "parameter_server".
"""
import json
import os
import signal
import sys
import time

import tensorflow as tf

import estimator_dist
from tests.programs import tf1_models

_CLUSTER, _TASK = (json.loads(os.environ["TF_CONFIG"])[key] for key in ("cluster", "task"))
# The chief, or worker 0 where there is none.
_FIRST = _TASK["type"] == "chief" or ("chief" not in _CLUSTER and _TASK["type"] == "worker"
                                      and _TASK["index"] == 0)


def _lost_peer():
    """The last worker of the cluster."""
    return _TASK["type"] == "worker" and _TASK["index"] == len(_CLUSTER["worker"]) - 1


def _config(kind, strategy, model_dir):
    if kind == "late_config" and _FIRST:
        tf.constant(1.0) + 1.0  # A TensorFlow op before the config.
    if kind == "rendezvous" and not _FIRST:
        time.sleep(60)
    timeout = 3 if kind == "rendezvous" else 120
    collective = {"collective_timeout": 600} if strategy == "multi_worker" else {}
    return estimator_dist.make_run_config(strategy, model_dir=model_dir,
                                          rendezvous_timeout=timeout, **collective)


def _model_fn(kind):
    def model_fn(features, labels, mode, params):
        if kind == "model_fn" and _FIRST:
            raise ValueError("model_fn: this model cannot be built")
        if kind == "lost_peer" and _lost_peer() and mode == tf.estimator.ModeKeys.TRAIN:
            os.kill(os.getpid(), signal.SIGKILL)
        return tf1_models.regression_model_fn(features, labels, mode, params)
    return model_fn


def _input_fn(kind):
    x, y = tf1_models.regression_data()
    made = tf1_models.context_input_fn(x, y, global_batch_size=16)

    def input_fn(input_context=None):
        if kind == "input_fn" and _FIRST:
            raise ValueError("input_fn: the training files are missing")
        return made(input_context)
    return input_fn


def main(kind, strategy, model_dir):
    config = _config(kind, strategy, model_dir)
    estimator = tf.estimator.Estimator(_model_fn(kind), config=config,
                                       params={"learning_rate": 0.01})
    tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(_input_fn(kind), max_steps=1000000),
        tf.estimator.EvalSpec(_input_fn(kind), steps=2))


if __name__ == "__main__":
    main(*sys.argv[1:])
