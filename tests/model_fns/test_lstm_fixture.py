"""lstm_model_fn reads a checkpoint written by plain TF1 code with TensorFlow 2.15.1.

``tests/fixtures/tf1_lstm`` is versioned: a ``BasicLSTMCell`` + ``dynamic_rnn`` model_fn
(``tests/fixtures/fixture_models.py``) trained under ``disable_v2_behavior()`` and the
logits it predicted (``tests/fixtures/make_fixtures.py``). Whatever kernel
``model_fns._lstm_stack`` runs, the old checkpoint must give the old logits.
"""
import os

import numpy as np
import tensorflow as tf

import model_fns
from tests.support import REPO_ROOT
from tests.fixtures import fixture_models

v1 = tf.compat.v1
_FIXTURE = os.path.join(REPO_ROOT, "tests", "fixtures", "tf1_lstm")
# The fixture's dense head is ``output_layer``; lstm_model_fn's is ``logits``.
_ASSIGNMENT = {"rnn/": "rnn/", "output_layer/": "logits/"}


def _predicted_logits(x, params):
    with tf.Graph().as_default():
        features = {"x": v1.placeholder(tf.float32, [None, None, x.shape[-1]])}
        spec = model_fns.lstm_model_fn(features, None, tf.estimator.ModeKeys.PREDICT, params)
        v1.train.init_from_checkpoint(_FIXTURE, _ASSIGNMENT)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            return session.run(spec.predictions["logits"], {features["x"]: x})


def test_versioned_tf1_checkpoint_gives_its_logits():
    expected = np.load(os.path.join(_FIXTURE, "expected.npz"))
    params = {"num_units": fixture_models.UNITS, "num_classes": fixture_models.CLASSES,
              "learning_rate": 0.05}
    logits = _predicted_logits(expected["x"], params)
    np.testing.assert_allclose(logits, expected["logits"], atol=1e-5)
    assert np.abs(expected["logits"]).max() > 0.1


def test_versioned_checkpoint_holds_the_layout_model_fns_declares():
    names = dict(tf.train.list_variables(_FIXTURE))
    (scope,) = model_fns.lstm_cell_scopes(1)
    units, dim = fixture_models.UNITS, fixture_models.INPUT_DIM
    assert names[f"{scope}/kernel"] == [dim + units, 4 * units]
    assert names[f"{scope}/bias"] == [4 * units]
