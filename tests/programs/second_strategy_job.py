"""A multi-worker task that builds a second strategy after training with a first, while
worker 0 is late for it; run as a module in every task (``TF_CONFIG`` set).

    python -m tests.programs.second_strategy_job MODEL_DIR STRATEGY DELAY [TIMEOUT]

STRATEGY "package": TF2 behaviour, two Estimators one after the other, each with its own
``estimator_dist.make_run_config("multi_worker", rendezvous_timeout=TIMEOUT)``, as
fine-tuning scripts build them; prints ``RESULT {metrics}`` at the end, or
``ERROR Type: first line`` if the second config raises. STRATEGY "plain": TensorFlow
alone, two ``tf.distribute.MultiWorkerMirroredStrategy()`` each summing one value over
the workers; prints ``RESULT sum``. Either way worker 0 sleeps DELAY seconds before it
builds the second strategy (a chief that exports or evaluates first), so that worker 1
builds its own and starts its collectives first.
"""
import json
import os
import sys
import time

import tensorflow as tf

from tests.programs import tf1_models

_STEPS = 10


def _late_on_worker_0(delay):
    if json.loads(os.environ["TF_CONFIG"])["task"]["index"] == 0:
        time.sleep(delay)


def _estimator(model_dir, timeout):
    import estimator_dist  # Late: a plain run must not load the package.
    config = estimator_dist.make_run_config("multi_worker", rendezvous_timeout=timeout,
                                            model_dir=model_dir, tf_random_seed=1)
    return tf.compat.v1.estimator.Estimator(tf1_models.iris_style_model_fn, config=config,
                                            params={"learning_rate": 0.1})


def _input_fn():
    x, y = tf1_models.regression_data()
    labels = (y[:, 0] > 0).astype("int32")
    return tf.data.Dataset.from_tensor_slices(({"x": x}, labels)).repeat().batch(16)


def run_package(model_dir, delay, timeout):
    _estimator(os.path.join(model_dir, "first"), timeout).train(_input_fn, max_steps=_STEPS)
    _late_on_worker_0(delay)
    try:
        second = _estimator(os.path.join(model_dir, "second"), timeout)
    except Exception as error:  # The outcome line is the test's evidence.
        print(f"ERROR {type(error).__name__}: {str(error).splitlines()[0]}", flush=True)
        return 1
    second.train(_input_fn, max_steps=_STEPS)
    metrics = second.evaluate(_input_fn, steps=2)
    print("RESULT " + json.dumps({"global_step": int(metrics["global_step"])}), flush=True)
    return 0


def _sum_over_workers(strategy):
    return float(strategy.reduce(tf.distribute.ReduceOp.SUM,
                                 strategy.run(lambda: tf.constant(1.0)), axis=None))


def run_plain(delay):
    first = _sum_over_workers(tf.distribute.MultiWorkerMirroredStrategy())
    _late_on_worker_0(delay)
    second = _sum_over_workers(tf.distribute.MultiWorkerMirroredStrategy())
    print(f"RESULT {first + second}", flush=True)
    return 0


def main(argv):
    model_dir, strategy, delay = argv[0], argv[1], float(argv[2])
    if strategy == "plain":
        return run_plain(delay)
    return run_package(model_dir, delay, int(argv[3]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
