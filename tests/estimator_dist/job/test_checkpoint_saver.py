"""The CLI's checkpoint saver against Estimator's own, over several ``train`` calls."""
import glob

import pytest

import tensorflow as tf

from estimator_dist import mends
from estimator_dist.job import checkpoint_saver
from tests.estimator_dist import tf1_models


def _graph_events(model_dir):
    """How many times the training events files hold the graph."""
    return sum(bool(event.graph_def)
               for path in glob.glob(f"{model_dir}/events.out.tfevents.*")
               for event in tf.compat.v1.train.summary_iterator(path))


def _train_three_times(model_dir, own_saver):
    config = tf.estimator.RunConfig(model_dir=model_dir, save_checkpoints_steps=2)
    estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, config=config,
                                       params={"learning_rate": 0.01})
    x, y = tf1_models.regression_data()
    for stop in (2, 4, 6):
        hooks = [checkpoint_saver.CheckpointSaverHook(config)] if own_saver else []
        estimator.train(tf1_models.dataset_input_fn(x, y, 16), max_steps=stop, hooks=hooks)
    return tf.train.latest_checkpoint(model_dir)


@pytest.mark.slow
def test_tf_saver_writes_the_graph_at_every_train_call(model_dir):
    """Plain TF: once when the process opens its writer, then once per call."""
    _train_three_times(model_dir, own_saver=False)
    assert _graph_events(model_dir) == 4


@pytest.mark.slow
def test_saver_leaves_the_graph_to_the_writer_and_saves_checkpoints(model_dir):
    assert _train_three_times(model_dir, own_saver=True).endswith("model.ckpt-6")
    assert _graph_events(model_dir) == 1


def test_saver_with_its_mend_off_writes_the_graph_as_tensorflow(model_dir, monkeypatch):
    monkeypatch.setenv(mends.OFF_VARIABLE, "saver_graph_events")
    assert _train_three_times(model_dir, own_saver=True).endswith("model.ckpt-6")
    assert _graph_events(model_dir) == 4
