"""A TF1-style program (v2 behaviour off) that signals itself while training under
``PreemptionHook``, then trains again from what was saved; prints one JSON line of what
happened.

    python -m tests.programs.preemption_job MODEL_DIR SIGNAL_NAME
"""
import json
import os
import signal
import sys

import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()

import estimator_dist  # noqa: E402  (after the TF1 switch, as legacy scripts do)
from tests.programs import tf1_models  # noqa: E402

_SIGNAL_AT_STEP = 30


class _SignalAtStep(tf.train.SessionRunHook):
    """Sends this process ``signum`` after the step that reaches ``step``; records the
    global step each session starts at."""

    def __init__(self, signum, step):
        self._signum, self._step = signum, step
        self.start_steps = []

    def after_create_session(self, session, coord):
        del coord  # Unused.
        self.start_steps.append(int(session.run(tf.train.get_global_step())))

    def begin(self):
        self._global_step = tf.train.get_global_step()

    def after_run(self, run_context, run_values):
        del run_values  # Unused.
        # A run of its own: a fetch in the training run may read the step on either side
        # of the train op's increment, and skip the one that should send the signal.
        if int(run_context.session.run(self._global_step)) == self._step:
            os.kill(os.getpid(), self._signum)


def main(model_dir, signal_name):
    signum = signal.Signals[signal_name]
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir,
                                            tf_random_seed=1)
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                       params={"learning_rate": 0.01})
    x, y = tf1_models.regression_data()
    input_fn = tf1_models.dataset_input_fn(x, y, batch_size=8)  # Ignores input_context.
    before = signal.getsignal(signum)
    probe = _SignalAtStep(signum, _SIGNAL_AT_STEP)
    try:
        estimator.train(input_fn, max_steps=10**6,
                        hooks=[estimator_dist.PreemptionHook(), probe])
        stopped = None
    except estimator_dist.Preempted as error:
        stopped = {"signum": int(error.signum), "step": error.step,
                   "checkpoint": error.checkpoint, "message": str(error)}
    handler_restored = signal.getsignal(signum) is before
    latest = tf.train.latest_checkpoint(model_dir)
    resume_to = stopped["step"] + 5 if stopped else 1
    estimator.train(input_fn, max_steps=resume_to, hooks=[probe])
    print(json.dumps({"stopped": stopped, "latest": latest, "start_steps": probe.start_steps,
                      "handler_restored": handler_restored,
                      "final": tf.train.latest_checkpoint(model_dir)}))


if __name__ == "__main__":
    main(*sys.argv[1:])
