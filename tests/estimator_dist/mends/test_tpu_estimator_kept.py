"""A ``TPUEstimator(...)`` constructor kept as written under a tf.distribute strategy, and
make_estimator's TPUEstimator batch sizes (train, eval, predict) on a plain Estimator."""
import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
from tests.support import assert_passes_under_tf1_behaviour

_TPU = tf.compat.v1.estimator.tpu
_MODES = tf.estimator.ModeKeys


def _recording_model_fn(seen):
    """A TPUEstimator-style model_fn that records ``(mode, params["batch_size"], rows)``
    (rows: a Dimension under TF1 behaviour, hence ``dimension_value``)."""

    def model_fn(features, labels, mode, params):
        seen.append((mode, params["batch_size"],
                     tf.compat.dimension_value(features["x"].shape[0])))
        logits = tf.compat.v1.layers.dense(features["x"], 2)
        if mode == _MODES.PREDICT:
            return _TPU.TPUEstimatorSpec(mode, predictions={"logits": logits})
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, tf.compat.v1.train.get_global_step())
        return _TPU.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


def _input_fn(params):
    x = np.random.RandomState(0).rand(64, 3).astype(np.float32)
    dataset = tf.data.Dataset.from_tensor_slices(({"x": x}, (x[:, 0] > 0.5).astype(np.int32)))
    return dataset.repeat().batch(params["batch_size"], drop_remainder=True)


def _run_all_modes(estimator):
    estimator.train(_input_fn, max_steps=2)
    estimator.evaluate(_input_fn, steps=1)
    next(estimator.predict(lambda params: _input_fn(params).map(lambda features, labels: features)))


def test_tpu_estimator_plain_run_config_refused_by_tensorflow(model_dir):
    """What a kept constructor meets without the package: TensorFlow's refusal."""
    with pytest.raises(ValueError, match=r"`config` must be provided with type "
                                         r"`tpu_config.RunConfig`"):
        _TPU.TPUEstimator(_recording_model_fn([]), config=tf.estimator.RunConfig(model_dir),
                          use_tpu=False, train_batch_size=16)


@pytest.mark.parametrize("strategy, replicas", [("default", 1), ("mirrored", 2)])
@pytest.mark.slow
def test_tpu_estimator_strategy_config_runs_with_batch_per_mode(strategy, replicas, model_dir):
    config = estimator_dist.make_run_config(
        strategy, num_replicas=replicas if strategy == "mirrored" else None, model_dir=model_dir)
    seen = []
    estimator = _TPU.TPUEstimator(_recording_model_fn(seen), config=config, use_tpu=False,
                                  train_batch_size=16, eval_batch_size=8, predict_batch_size=4)
    assert isinstance(estimator, tf.estimator.Estimator)
    assert not isinstance(estimator, _TPU.TPUEstimator)
    assert type(estimator.config.train_distribute) is type(config.train_distribute)
    _run_all_modes(estimator)
    assert sorted(set(seen)) == [(_MODES.EVAL, 8, 8), (_MODES.PREDICT, 4, 4),
                                 (_MODES.TRAIN, 16 // replicas, 16 // replicas)]


def test_tpu_estimator_tpu_config_still_builds_tpu_estimator(model_dir):
    config = estimator_dist.make_run_config("tpu", use_tpu=False, model_dir=model_dir)
    estimator = _TPU.TPUEstimator(_recording_model_fn([]), config=config, use_tpu=False,
                                  train_batch_size=16)
    assert isinstance(estimator, _TPU.TPUEstimator)


def test_tpu_estimator_embedding_config_refused_naming_make_estimator(model_dir):
    config = estimator_dist.make_run_config(model_dir=model_dir)
    with pytest.raises(ValueError, match=r"embedding_config_spec needs a TPU: build the "
                                         r"Estimator with estimator_dist\.make_estimator"):
        _TPU.TPUEstimator(_recording_model_fn([]), config=config, train_batch_size=16,
                          embedding_config_spec=object())


def test_make_estimator_eval_batch_not_divisible_refused(model_dir):
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir)
    with pytest.raises(ValueError, match=r"batch_size must be a multiple of the 2 replicas\. "
                                         r"Received: batch_size=5"):
        estimator_dist.make_estimator(_recording_model_fn([]), config, batch_size=5)


def test_make_estimator_batch_sizes_kept_in_deep_copies(model_dir):
    """A cluster's workers train deep copies of the Estimator: the copies keep the sizes."""
    import copy

    config = estimator_dist.make_run_config(model_dir=model_dir)
    seen = []
    estimator = copy.deepcopy(estimator_dist.make_estimator(
        _recording_model_fn(seen), config, batch_size=16, eval_batch_size=8))
    estimator.evaluate(_input_fn, steps=1)
    assert seen == [(_MODES.EVAL, 8, 8)]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_module_under_tf1_behaviour():
    assert_passes_under_tf1_behaviour(__file__, "-m", "not slow", timeout=240)
