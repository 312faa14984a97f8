"""The exported LSTM: its serving signature, and streaming a sequence in chunks."""
import numpy as np
import pytest
import tensorflow as tf

import estimator_dist
import model_fns
from estimator_dist.export import export_saved_model
from tests.model_fns import harness

# One trained export (a module fixture) serves every test: one worker trains it.
pytestmark = pytest.mark.xdist_group("lstm_streaming")

UNITS, DIM, TIME = 5, 2, 12


@pytest.fixture(scope="module")
def serving(tmp_path_factory):
    """The ``serving_default`` signature of a briefly trained two-layer LSTM."""
    model_dir = str(tmp_path_factory.mktemp("lstm_export"))
    params = {"num_units": UNITS, "num_classes": 3, "learning_rate": 0.1, "num_layers": 2}
    estimator = tf.estimator.Estimator(
        model_fns.lstm_model_fn, params=params,
        config=estimator_dist.make_run_config("default", model_dir=model_dir, tf_random_seed=2))
    train = harness.from_arrays({"x": harness.floats(16, TIME, DIM)}, harness.classes(16, 3),
                                batch_size=8)
    estimator.train(train, max_steps=2)
    state = [None, 2 * UNITS]
    path = export_saved_model(estimator, model_dir + "/export",
                              {"x": [None, None, DIM], "state_c": state, "state_h": state})
    return tf.saved_model.load(path).signatures["serving_default"]


@pytest.mark.slow
def test_serving_signature_has_pinned_inputs_and_outputs(serving):
    inputs = set(serving.structured_input_signature[1])
    assert inputs == {"x", "state_c", "state_h"}
    assert {"logits", "state_c", "state_h", "probabilities", "classes"} <= set(
        serving.structured_outputs)


def test_streaming_in_chunks_matches_whole_sequence(serving):
    x = harness.floats(3, TIME, DIM, seed=4)
    zeros = tf.zeros([3, 2 * UNITS])
    whole = serving(x=tf.constant(x), state_c=zeros, state_h=zeros)
    c, h = zeros, zeros
    for chunk in np.split(x, [5, 6], axis=1):  # chunks of 5, 1 and 6 steps
        out = serving(x=tf.constant(chunk), state_c=c, state_h=h)
        c, h = out["state_c"], out["state_h"]
    np.testing.assert_allclose(c, whole["state_c"], atol=1e-5)
    np.testing.assert_allclose(h, whole["state_h"], atol=1e-5)
    np.testing.assert_allclose(out["logits"], whole["logits"], atol=1e-5)
    first_chunk_only = serving(x=tf.constant(x[:, :5]), state_c=zeros, state_h=zeros)
    assert not np.allclose(first_chunk_only["state_h"], whole["state_h"], atol=1e-3)
