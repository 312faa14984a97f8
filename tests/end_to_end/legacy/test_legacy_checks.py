"""The library's answers to legacy habits, checked in-process (the corpus runs them for real)."""
import json
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
from estimator_dist.distribute import input_checks
from tests.support import REPO_ROOT
from tests.end_to_end.legacy import corpus


def _batched(batch):
    return tf.data.Dataset.from_tensor_slices(np.zeros([64, 3], np.float32)).batch(batch, True)


def test_whole_batch_warning_v1_tensorshape_names_batch(monkeypatch):
    """Under disable_v2_behavior a dimension is an unhashable Dimension."""
    monkeypatch.setattr(input_checks, "_warned", set())
    tf.compat.v1.disable_v2_tensorshape()
    try:
        with pytest.warns(input_checks.GlobalBatchWarning, match=r"a whole batch of 16, so the "
                                                                  r"global batch is 48"):
            input_checks._warn_whole_batches(_batched(16), 3)
    finally:
        tf.compat.v1.enable_v2_tensorshape()


def test_queue_based_input_fn_error_names_replacement():
    input_fn = tf.compat.v1.estimator.inputs.numpy_input_fn(
        {"x": np.zeros([8, 2], np.float32)}, np.zeros([8]), batch_size=4, shuffle=False)
    with tf.Graph().as_default():
        result = input_fn()
        with pytest.raises(ValueError, match=r"tf\.estimator\.inputs builds queue-based tensors: "
                                             r"use input_fns\.numpy_input_fn / "
                                             r"input_fns\.pandas_input_fn \(same arguments\)"):
            input_checks._check_result(result)


def test_per_replica_batch_params_read_counts_as_sizing():
    checked = input_checks.checked_input_fn(
        lambda ctx, params=input_checks.PerReplicaBatchParams(batch_size=8):
        _batched(params["batch_size"]), num_replicas=5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", input_checks.GlobalBatchWarning)
        checked(tf.distribute.InputContext(1, 0, 5))


def test_tpu_config_on_plain_estimator_names_make_estimator(model_dir):
    config = estimator_dist.make_run_config("tpu", use_tpu=False, model_dir=model_dir)
    with pytest.raises(ValueError, match=r"strategy 'tpu' needs a TPUEstimator: build it with "
                                         r"estimator_dist\.make_estimator\(.*Received: "
                                         r"DNNClassifierV2"):
        tf.estimator.DNNClassifier([8], [tf.feature_column.numeric_column("x")], config=config)


def test_tpu_run_config_arguments_accepted(model_dir):
    tpu = tf.compat.v1.estimator.tpu
    tpu_config = tpu.TPUConfig(iterations_per_loop=7, num_shards=8,
                               per_host_input_for_training=tpu.InputPipelineConfig.PER_HOST_V2)
    config = estimator_dist.make_run_config("tpu", use_tpu=False, cluster=None, master=None,
                                            tpu_config=tpu_config, model_dir=model_dir)
    assert config.tpu_config.iterations_per_loop == 7 and config.tpu_config.num_shards == 8


def test_tpu_zone_and_project_reach_resolver(monkeypatch):
    seen = {}

    def resolver(**kwargs):
        seen.update(kwargs)
        raise ValueError("unreachable")

    monkeypatch.setattr(tf.distribute.cluster_resolver, "TPUClusterResolver", resolver)
    with pytest.raises(ValueError, match=r"could not reach TPU 'my-tpu'"):
        estimator_dist.make_run_config("tpu", tpu="my-tpu", tpu_zone="us-central1-b",
                                       gcp_project="proj")
    assert seen == {"tpu": "my-tpu", "zone": "us-central1-b", "project": "proj"}


def test_tpu_run_config_arguments_outside_tpu_name_the_change():
    with pytest.raises(ValueError, match=r"master, tpu_config apply to strategy 'tpu' only: "
                                         r"drop them"):
        estimator_dist.make_run_config("mirrored", master="", tpu_config=None)


def test_tpu_config_and_num_replicas_disagree_rejected():
    tpu_config = tf.compat.v1.estimator.tpu.TPUConfig(num_shards=8)
    with pytest.raises(ValueError, match=r"tpu_config already sets iterations_per_loop and "
                                         r"num_shards"):
        estimator_dist.make_run_config("tpu", use_tpu=False, num_replicas=1,
                                       tpu_config=tpu_config)


def test_boosted_trees_not_in_tensorflow_estimator_2_15():
    """The fact docs/legacy.md states: 2.15 has no BoostedTreesClassifier to run."""
    assert not hasattr(tf.compat.v1.estimator, "BoostedTreesClassifier")
    assert not hasattr(tf.estimator, "BoostedTreesClassifier")


def test_docs_table_matches_corpus():
    """docs/legacy.md shows the corpus table test_corpus.py asserts, cell for cell, and the
    cells that differ on current TensorFlow."""
    with open(os.path.join(REPO_ROOT, "docs", "legacy.md"), encoding="utf-8") as doc:
        text = doc.read()
    assert corpus.doc_table() in text
    assert corpus.current_tf_doc_lines() in text


def test_run_config_on_cluster_says_chief_on_every_worker(monkeypatch):
    """The fact docs/legacy.md states: with a strategy and TF_CONFIG, RunConfig leaves
    is_chief to the distribute coordinator, so worker 1's config also says chief."""
    cluster = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster,
                                                "task": {"type": "worker", "index": 1}}))
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    config = tf.estimator.RunConfig(train_distribute=strategy)
    assert config.task_type == "worker" and config.is_chief
