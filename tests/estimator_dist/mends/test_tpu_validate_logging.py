"""TPUEstimator on CPU (``use_tpu=False``) writes its step-rate summaries every
``log_step_count_steps`` steps under a config from make_run_config; plain TF: every step."""
import glob
import os

import numpy as np
import tensorflow as tf

import estimator_dist

_TPU = tf.compat.v1.estimator.tpu
_STEPS = 60


def _model_fn(features, labels, mode, params):
    del params  # The batch size is the input_fn's.
    logits = tf.compat.v1.layers.dense(features["x"], 2)
    loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
        loss, tf.compat.v1.train.get_global_step())
    return _TPU.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def _input_fn(params):
    x = np.random.RandomState(0).rand(64, 3).astype(np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, (x[:, 0] > 0.5).astype(np.int32)))
    return dataset.repeat().batch(params["batch_size"], drop_remainder=True)


def _rate_summaries(config, model_dir):
    """How many global_step/sec summaries a TPUEstimator on CPU writes in ``_STEPS`` steps."""
    estimator = _TPU.TPUEstimator(_model_fn, config=config, use_tpu=False, train_batch_size=8)
    estimator.train(_input_fn, max_steps=_STEPS)
    count = 0
    for path in glob.glob(os.path.join(model_dir, "events.out.tfevents*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            count += sum(value.tag == "global_step/sec" for value in event.summary.value)
    return count


def test_tf_tpu_estimator_on_cpu_logs_every_step(model_dir):
    """log_step_count_steps=20 with iterations_per_loop=100: TensorFlow logs every step."""
    config = _TPU.RunConfig(model_dir=model_dir, log_step_count_steps=20,
                            tpu_config=_TPU.TPUConfig(iterations_per_loop=100))
    assert _rate_summaries(config, model_dir) >= _STEPS - 2


def test_make_run_config_tpu_on_cpu_logs_every_log_step_count_steps(model_dir):
    config = estimator_dist.make_run_config("tpu", use_tpu=False, model_dir=model_dir,
                                            iterations_per_loop=100, log_step_count_steps=20)
    assert config.log_step_count_steps == 20  # What the user reads is what was given.
    assert 1 <= _rate_summaries(config, model_dir) <= _STEPS // 20


def test_mend_off_keeps_tensorflow_behaviour(model_dir, monkeypatch):
    monkeypatch.setenv("ESTIMATOR_DIST_MENDS_OFF", "tpu_validate_logging")
    config = estimator_dist.make_run_config("tpu", use_tpu=False, model_dir=model_dir,
                                            iterations_per_loop=100, log_step_count_steps=20)
    assert _rate_summaries(config, model_dir) >= _STEPS - 2
