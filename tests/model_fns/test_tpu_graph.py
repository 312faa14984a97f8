"""With use_tpu True the train step sums gradients across shards and writes no summaries."""
import numpy as np
import pytest
import tensorflow as tf

import model_fns
from tests.model_fns import harness

v1 = tf.compat.v1
TRAIN = tf.estimator.ModeKeys.TRAIN

CASES = {
    "dense": (model_fns.dense_classifier_model_fn,
              {"hidden_units": [8], "num_classes": 2, "learning_rate": 0.1},
              {"x": harness.floats(8, 4)}, harness.classes(8, 2)),
    "lstm_stateful_clipped": (model_fns.lstm_model_fn,
                              {"num_units": 4, "num_classes": 2, "output": "sequence",
                               "num_streams": 8, "learning_rate": 0.1, "clip_norm": 1.0},
                              {"x": harness.floats(8, 5, 2),
                               "stream": np.arange(8, dtype=np.int32),
                               "reset": np.zeros(8, bool)}, harness.classes(8, 2, shape=(5,))),
}


def _train_graph(case_name, use_tpu):
    model_fn, params, features, labels = CASES[case_name]
    with tf.Graph().as_default() as graph:
        v1.train.create_global_step()
        spec = model_fn(features, labels, TRAIN, dict(params, use_tpu=use_tpu, batch_size=8))
    return spec, {op.type for op in graph.get_operations()}


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_train_on_tpu_sums_across_shards_without_summaries(case_name):
    spec, op_types = _train_graph(case_name, use_tpu=True)
    assert isinstance(spec, v1.estimator.tpu.TPUEstimatorSpec)
    assert "CrossReplicaSum" in op_types
    assert not op_types & {"ScalarSummary", "HistogramSummary"}


@pytest.mark.parametrize("case_name", sorted(CASES))
def test_train_on_cpu_under_tpu_estimator_keeps_summaries(case_name):
    spec, op_types = _train_graph(case_name, use_tpu=False)
    assert isinstance(spec, v1.estimator.tpu.TPUEstimatorSpec)
    assert "CrossReplicaSum" not in op_types
    assert "ScalarSummary" in op_types


def test_static_input_shapes_give_static_output_shapes():
    model_fn, params, features, labels = CASES["lstm_stateful_clipped"]
    with tf.Graph().as_default():
        spec = model_fn(dict(features, sequence_length=np.full(8, 5, np.int32)), labels,
                        tf.estimator.ModeKeys.PREDICT, dict(params, use_tpu=True, batch_size=8))
    for name, tensor in spec.predictions.items():
        assert tensor.shape.is_fully_defined(), name
