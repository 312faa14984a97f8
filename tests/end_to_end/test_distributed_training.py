"""Unchanged TF1-style model_fns and input_fns under make_run_config's strategies,
in TF2 behaviour here and in TF1 behaviour through test_module_under_tf1_behaviour."""
import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist.distribute.input_checks import GlobalBatchWarning
from tests.support import assert_passes_under_tf1_behaviour, tf1_behaviour_runs
from tests.programs import tf1_models

pytestmark = pytest.mark.slow


def _train(model_fn, input_fn, model_dir, strategy="default", steps=20):
    num_replicas = 2 if strategy == "mirrored" else None
    config = estimator_dist.make_run_config(strategy, num_replicas=num_replicas,
                                            model_dir=model_dir, tf_random_seed=1)
    estimator = tf.estimator.Estimator(model_fn, config=config,
                                       params={"learning_rate": 0.05, "count_examples": True})
    estimator.train(input_fn, max_steps=steps)
    return estimator


def test_mirrored_two_replicas_match_one_device(tmp_path):
    x, y = tf1_models.regression_data()
    input_fn = tf1_models.context_input_fn(x, y, global_batch_size=16)
    one = _train(tf1_models.regression_model_fn, input_fn, str(tmp_path / "one"))
    two = _train(tf1_models.regression_model_fn, input_fn, str(tmp_path / "two"), "mirrored")
    for name in ("kernel", "bias"):
        np.testing.assert_allclose(two.get_variable_value(name), one.get_variable_value(name),
                                   atol=1e-5)
    assert two.get_variable_value("global_step") == 20
    eval_fn = tf1_models.context_input_fn(x, y, global_batch_size=16)
    one_loss = one.evaluate(eval_fn, steps=4)["loss"]
    two_loss = two.evaluate(eval_fn, steps=4)["loss"]
    assert two_loss == pytest.approx(one_loss, rel=1e-4)


def test_input_fn_with_context_global_batch_kept(model_dir):
    x, y = tf1_models.regression_data()
    estimator = _train(tf1_models.regression_model_fn,
                       tf1_models.context_input_fn(x, y, global_batch_size=16), model_dir,
                       "mirrored", steps=5)
    assert estimator.get_variable_value("seen_examples") == 16 * 5


def test_input_fn_without_context_warns_and_doubles_global_batch(model_dir):
    x, y = tf1_models.regression_data()
    with pytest.warns(GlobalBatchWarning, match=r"each of the 2 replicas receives a whole "
                                                r"batch of 16, so the global batch is 32"):
        estimator = _train(tf1_models.regression_model_fn,
                           tf1_models.dataset_input_fn(x, y, batch_size=16), model_dir,
                           "mirrored", steps=5)
    assert estimator.get_variable_value("seen_examples") == 32 * 5


def test_iterator_input_fn_error_names_the_fix(model_dir):
    x, y = tf1_models.regression_data()
    with pytest.raises(ValueError, match=r"input_fn must return a tf\.data\.Dataset under a "
                                         r"distribution strategy.*return the Dataset itself"):
        _train(tf1_models.regression_model_fn, tf1_models.iterator_input_fn(x, y, 16),
               model_dir, "mirrored", steps=2)


def test_iterator_input_fn_plain_tensorflow_message_is_bare(model_dir):
    """The fact behind the check: TF's own message does not name the fix."""
    x, y = tf1_models.regression_data()
    strategy = tf.distribute.MirroredStrategy(
        ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())
    config = tf.estimator.RunConfig(
        model_dir=model_dir, train_distribute=strategy,
        session_config=tf.compat.v1.ConfigProto(device_count={"CPU": 2}))
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                       params={"learning_rate": 0.1})
    with pytest.raises(ValueError, match=r"^input_fn must return a tf\.data\.Dataset or a "
                                         r"callable\.$"):
        estimator.train(tf1_models.iterator_input_fn(x, y, 16), max_steps=2)


def test_iterator_input_fn_still_works_without_strategy(model_dir):
    x, y = tf1_models.regression_data()
    estimator = _train(tf1_models.regression_model_fn, tf1_models.iterator_input_fn(x, y, 16),
                       model_dir, steps=3)
    assert estimator.get_variable_value("global_step") == 3


def _loss(estimator, input_fn):
    return estimator.evaluate(input_fn, steps=4)["loss"]


def test_iris_style_model_fn_unchanged_under_mirrored(model_dir):
    x, y = tf1_models.classification_data()
    input_fn = tf1_models.context_input_fn(x, y, global_batch_size=32)
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir,
                                            tf_random_seed=1)
    estimator = tf.estimator.Estimator(tf1_models.iris_style_model_fn, config=config,
                                       params={"learning_rate": 0.1})
    estimator.train(input_fn, max_steps=1)
    before = _loss(estimator, input_fn)
    estimator.train(input_fn, max_steps=60)
    metrics = estimator.evaluate(input_fn, steps=4)
    assert metrics["loss"] < 0.8 * before
    assert 0.0 <= metrics["accuracy"] <= 1.0
    predictions = estimator.predict(tf1_models.context_input_fn(x, y, 32))
    assert next(predictions)["classes"] in (0, 1, 2)


@pytest.mark.parametrize("replicas", [2, 4])
def test_basic_lstm_model_fn_unchanged_under_mirrored(model_dir, replicas):
    x, y = tf1_models.classification_data(time_steps=6)
    input_fn = tf1_models.context_input_fn(x, y, global_batch_size=32)
    config = estimator_dist.make_run_config("mirrored", num_replicas=replicas,
                                            model_dir=model_dir, tf_random_seed=1)
    estimator = tf.estimator.Estimator(tf1_models.basic_lstm_model_fn, config=config,
                                       params={"learning_rate": 0.02})
    estimator.train(input_fn, max_steps=1)
    before = _loss(estimator, input_fn)
    estimator.train(input_fn, max_steps=40)
    assert _loss(estimator, input_fn) < 0.8 * before


def _on_read_model_fn(features, labels, mode, params):
    """Phase "write": replica 0's copy of v holds 10, replica 1's 0 (their SUM: 10).
    Phase "read": w records what replica 0's copy of v holds after a restore."""
    del labels  # Unused.
    v1 = tf.compat.v1
    per_replica = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                       aggregation=tf.VariableAggregation.SUM)
    v = v1.get_variable("v", [], initializer=v1.zeros_initializer(), **per_replica)
    w = v1.get_variable("w", [], initializer=v1.zeros_initializer(), **per_replica)
    kernel = v1.get_variable("kernel", [tf1_models.NUM_FEATURES, 1])
    loss = tf.reduce_mean(tf.matmul(features["x"], kernel))
    first = tf.cast(tf.equal(tf.distribute.get_replica_context().replica_id_in_sync_group, 0),
                    tf.float32)
    update = (v.assign(10.0 * first) if params["phase"] == "write"
              else w.assign(v.read_value() * first))
    step = v1.assign_add(v1.train.get_global_step(), 1)
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=tf.group(update, step))


def test_on_read_sum_variable_restores_sum_divided_by_replicas(model_dir):
    """The fact behind the LSTM's mirrored stream state (docs/models.md): a checkpoint
    holds the SUM of the copies, and a restore gives every copy SUM / replicas."""
    x, y = tf1_models.regression_data()
    input_fn = tf1_models.context_input_fn(x, y, global_batch_size=16)
    config = estimator_dist.make_run_config("mirrored", num_replicas=2, model_dir=model_dir)
    for phase, steps in (("write", 1), ("read", 2)):
        estimator = tf.estimator.Estimator(_on_read_model_fn, config=config,
                                           params={"phase": phase})
        estimator.train(input_fn, max_steps=steps)
    assert estimator.get_variable_value("v") == pytest.approx(10.0)  # The saved SUM.
    assert estimator.get_variable_value("w") == pytest.approx(5.0)  # Replica 0 got 10 / 2.


def test_session_config_without_device_count_drops_replicas(model_dir):
    """The fact behind cpu_session_config(): a plain ConfigProto loses the logical CPUs."""
    x, y = tf1_models.regression_data()
    strategy = tf.distribute.MirroredStrategy(
        ["/cpu:0", "/cpu:1"], cross_device_ops=tf.distribute.ReductionToOneDevice())
    config = tf.estimator.RunConfig(model_dir=model_dir, train_distribute=strategy,
                                    session_config=tf.compat.v1.ConfigProto())
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                       params={"learning_rate": 0.1})
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Cannot assign a device.*CPU:1"):
        estimator.train(tf1_models.context_input_fn(x, y, 16), max_steps=2)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("tests", tf1_behaviour_runs(__file__, globals(), per_run=3))
def test_module_under_tf1_behaviour(tests):
    """Every test above again, under TF1 behaviour (three to a process)."""
    assert_passes_under_tf1_behaviour(*tests, timeout=540)
