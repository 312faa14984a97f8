"""An evaluator task of ``train_and_evaluate`` in plain TensorFlow.

``estimator_dist`` is imported only for ``tf.estimator`` on TensorFlow 2.16+ (on 2.15 the
import changes nothing): nothing calls ``make_run_config``, so no evaluator mend is in.

    python -m tests.programs.evaluator_end_probe MODEL_DIR MAX_STEPS THROTTLE_SECS

Evaluates the checkpoints another process writes to MODEL_DIR, with
``EvalSpec(start_delay_secs=0, throttle_secs=THROTTLE_SECS)``; prints ``EVALUATED STEP``
after each evaluation and ``ENDED`` when ``train_and_evaluate`` returns.
"""
import json
import os
import sys

import tensorflow as tf

import estimator_dist  # noqa: F401  (imported for its mends)
from tests.programs import tf1_models

_PARAMS = {"learning_rate": 0.01}


class PrintEvaluatedStep(tf.estimator.SessionRunHook):
    """Prints the global step of each evaluation as it ends."""

    def begin(self):
        self._step = tf.compat.v1.train.get_global_step()

    def end(self, session):
        print("EVALUATED", session.run(self._step), flush=True)


def main(model_dir, max_steps, throttle_secs):
    os.environ["TF_CONFIG"] = json.dumps({"cluster": {"chief": ["127.0.0.1:1"]},
                                          "task": {"type": "evaluator", "index": 0}})
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, model_dir=model_dir,
                                       params=_PARAMS)
    x, y = tf1_models.regression_data()
    input_fn = tf1_models.dataset_input_fn(x, y, 16)
    tf.estimator.train_and_evaluate(
        estimator, tf.estimator.TrainSpec(input_fn, max_steps=max_steps),
        tf.estimator.EvalSpec(input_fn, steps=2, hooks=[PrintEvaluatedStep()],
                              start_delay_secs=0, throttle_secs=throttle_secs))
    print("ENDED", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
