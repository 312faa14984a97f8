"""Keras 2's feature-column layers in a model_fn on both ends (mend
``keras_3_feature_layers``): the program trains and evaluates (the evaluation graph restores
the checkpoint) with tf.keras as TensorFlow gives it, and on TensorFlow 2.16+ also under
``TF_USE_LEGACY_KERAS=1``, where tf.keras is tf-keras and the mend adds nothing."""
import json
import os

import pytest

from estimator_dist import mends
from estimator_dist.mends import releases
from tests.support import REPO_ROOT, run_pythons

pytestmark = [pytest.mark.slow, pytest.mark.both_ends, pytest.mark.timeout(420)]

_PROGRAM = os.path.join(REPO_ROOT, "tests", "programs", "feature_layers_model_fn.py")
CURRENT = mends.tensorflow_release() in releases.CURRENT


def _result(completed):
    for line in completed.stdout.splitlines():
        if line.startswith("RESULT feature_layers "):
            return json.loads(line.split(" ", 2)[2])
    raise AssertionError(completed.stdout[-2000:] + completed.stderr[-3000:])


def test_feature_column_layers_train_and_restore(tmp_path):
    runs = {"as_given": {}}
    if CURRENT:
        runs["legacy_keras"] = {"TF_USE_LEGACY_KERAS": "1"}
    completed = [run_pythons([[_PROGRAM, str(tmp_path / name)]], timeout=360, env=env)[0]
                 for name, env in runs.items()]
    results = dict(zip(runs, map(_result, completed)))
    for result in results.values():
        assert result["global_step"] == 3 and result["loss"] > 0
    # Keras 3 stays the user's tf.keras; the layers come from tf-keras.
    assert results["as_given"]["keras"] == ("keras._tf_keras.keras" if CURRENT
                                            else "keras.api._v2.keras")
    if CURRENT:
        assert results["legacy_keras"]["keras"] == "tf_keras.api._v2.keras"


@pytest.mark.skipif(not CURRENT, reason="TensorFlow 2.15's tf.keras has the layers")
def test_added_names_only(monkeypatch):
    """A name Keras has is kept; tf.keras.layers.Dense stays Keras 3's."""
    import tensorflow as tf
    import tf_keras

    import estimator_dist  # noqa: F401  (installs the mends)
    from estimator_dist.mends import keras_3_feature_layers

    assert tf.keras.layers.DenseFeatures is tf_keras.layers.DenseFeatures
    assert tf.compat.v1.keras.experimental.LinearModel is tf_keras.experimental.LinearModel
    assert tf.keras.layers.Dense.__module__.startswith("keras.")
    mine = object()
    monkeypatch.setattr(tf.keras.layers, "DenseFeatures", mine)
    keras_3_feature_layers.install()
    assert tf.keras.layers.DenseFeatures is mine
