"""The mends that give TensorFlow 2.16 and later ``tf.estimator`` back ("import" scope).

Each plain-TensorFlow test runs ``current_tf_probe.py`` in a fresh process without the
package: on 2.15 TensorFlow has the piece, on 2.16+ it fails as the mend's registry entry
says. The other tests show the mended process: tensorflow-estimator 2.15.0 unmodified,
the user's ``tf.keras`` untouched, the TPU stand-ins naming what they stand for.
"""
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from estimator_dist import mends
from estimator_dist.mends import catalogue, releases
from tests.support import run_python, run_pythons

# One probe of plain TensorFlow (a module fixture) serves every test: one worker runs it.
pytestmark = [pytest.mark.both_ends, pytest.mark.xdist_group("current_tf")]

_PROBE = os.path.join(os.path.dirname(__file__), "current_tf_probe.py")
_ORDER_PROBE = os.path.join(os.path.dirname(__file__), "import_order_probe.py")
CURRENT = mends.tensorflow_release() in releases.CURRENT


def _probe(*args, env=None):
    result = run_python([_PROBE, *args], timeout=240, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def plain_tf():
    """TensorFlow's own facts, no estimator_dist imported."""
    return _probe()


def _absent_on_current(fact, message):
    """On 2.15 TensorFlow has the piece (None: no error); on 2.16+ it fails with
    ``message``."""
    if CURRENT:
        assert fact is not None and message in fact, fact
    else:
        assert fact is None, fact


@pytest.mark.slow
def test_tf_export_has_no_estimator_api_name(plain_tf):
    assert plain_tf["estimator_api_name"] == (None if CURRENT else "estimator")
    _absent_on_current(plain_tf["tensorflow_estimator"],
                       "cannot import name 'estimator_training'")


@pytest.mark.slow
def test_tf_has_no_estimator_training_module(plain_tf):
    _absent_on_current(plain_tf["estimator_training"],
                       "No module named 'tensorflow.python.distribute.estimator_training'")


@pytest.mark.slow
def test_tf_has_no_tpu_session_support(plain_tf):
    _absent_on_current(plain_tf["session_support"],
                       "No module named 'tensorflow.python.tpu.session_support'")


@pytest.mark.slow
def test_tf_has_no_estimator(plain_tf):
    _absent_on_current(plain_tf["tf_estimator"], "has no attribute 'estimator'")
    _absent_on_current(plain_tf["v1_estimator"], "has no attribute 'estimator'")


@pytest.mark.slow
def test_tf_has_no_python_estimator_package(plain_tf):
    """Nor the compat API's modules by name (``from tensorflow.compat.v1.estimator import
    ...``); with the startup hook off no estimator_dist came in."""
    _absent_on_current(plain_tf["python_estimator"],
                       "No module named 'tensorflow.python.estimator'")
    _absent_on_current(plain_tf["v1_estimator_module"],
                       "No module named 'tensorflow.compat.v1.estimator'")
    assert plain_tf["estimator_dist_imported"] is False


@pytest.mark.slow
def test_tf_summary_needs_tensorboard(plain_tf):
    """setup.py requires TensorBoard on Python 3.12+ for it (TensorFlow 2.15 requires it
    itself, and its tf.summary.scalar runs without it)."""
    _absent_on_current(plain_tf["summary_without_tensorboard"],
                       "TensorBoard is not installed, missing implementation for "
                       "tf.summary.scalar")


@pytest.mark.slow
def test_keras_3_refuses_v1_layers_and_cells(plain_tf):
    _absent_on_current(plain_tf["dense"], "`dense` is not available with Keras 3.")
    _absent_on_current(plain_tf["basic_lstm_cell"],
                       "`BasicLSTMCell` is not available with Keras 3.")


@pytest.mark.slow
def test_keras_3_has_no_dense_features(plain_tf):
    _absent_on_current(plain_tf["dense_features"], "has no attribute 'DenseFeatures'")


@pytest.mark.slow
def test_keras_3_has_no_feature_column_layers(plain_tf):
    for fact in ("dense_features", "v1_dense_features"):
        _absent_on_current(plain_tf[fact], "has no attribute 'DenseFeatures'")
    for fact in ("sequence_features", "linear_model"):
        _absent_on_current(plain_tf[fact], "has no attribute 'experimental'")


@pytest.mark.slow
def test_keras_3_has_no_model_to_estimator(plain_tf):
    _absent_on_current(plain_tf["keras_estimator"], "has no attribute 'estimator'")


@pytest.mark.slow
def test_keras_3_layers_in_a_model_fn_renamed_between_graphs():
    """Run with the package imported (TensorFlow 2.16+ has no Estimator otherwise) and this
    mend off: the evaluation graph's layers are renamed and its restore fails."""
    unmended = _probe("--package-first", env={mends.OFF_VARIABLE: "keras_3_layer_names"})
    _absent_on_current(unmended["keras_layer_names"], "Restoring from checkpoint failed")


@pytest.mark.slow
def test_package_imported_before_tensorflow_restores_the_estimator(plain_tf):
    mended = _probe("--package-first")
    for fact in ("estimator_training", "session_support", "tensorflow_estimator",
                 "python_estimator", "v1_estimator_module",
                 "tf_estimator", "v1_estimator", "dense", "basic_lstm_cell", "keras_estimator",
                 "keras_layer_names"):
        assert mended[fact] is None, (fact, mended[fact])
    assert mended["estimator_api_name"] == "estimator"
    assert mended["keras"] == plain_tf["keras"]  # The user's tf.keras is TensorFlow's own.


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_tensorflow_estimator_imported_before_or_after_the_package():
    """Both orders in two processes, with ``all`` and a name that is no mend turned off:
    ``all`` leaves the restoring mends on; the unknown name is one line at import."""
    orders = ("package-first", "estimator-first")
    done = run_pythons([[_ORDER_PROBE, order] for order in orders], timeout=300,
                       env={mends.OFF_VARIABLE: "all,no_such_mend"})
    for order, result in zip(orders, done):
        assert result.returncode == 0, result.stderr[-2000:]
        facts = json.loads(result.stdout.strip().splitlines()[-1])
        assert facts["canned"] is None, (order, facts)
        assert "Traceback" not in result.stderr
        said = [line for line in result.stderr.splitlines() if "ESTIMATOR_DIST_MENDS_OFF" in line]
        assert said == ([f"estimator_dist: {mends.OFF_VARIABLE} must list mends among all, "
                         f"{', '.join(catalogue.NAMES)}. Received: {mends.OFF_VARIABLE}="
                         "'all,no_such_mend' (the import mends leave those names out)"]
                        if CURRENT else [])
    package_first, estimator_first = (json.loads(r.stdout.strip().splitlines()[-1])
                                      for r in done)
    assert package_first["tensorflow_estimator"] is None
    # Alone, TensorFlow 2.16+ refuses it; the package imports after the failed import.
    _absent_on_current(estimator_first["tensorflow_estimator"],
                       "cannot import name 'estimator_training'")
    assert estimator_first["estimator_dist"] is None


@pytest.mark.slow
def test_mend_turned_off_leaves_tensorflow_as_it_is():
    mended = _probe("--package-first", env={mends.OFF_VARIABLE: "estimator_api,v1_layers"})
    assert mended["tensorflow_estimator"] is None  # The other pieces are in.
    _absent_on_current(mended["tf_estimator"], "has no attribute 'estimator'")
    _absent_on_current(mended["dense"], "`dense` is not available with Keras 3.")


def test_import_mends_installed_exactly_on_current_tensorflow():
    import_scope = [name for name, mend in mends.MENDS.items() if mend.scope == "import"]
    assert import_scope
    installed = [name for name in mends.installed() if name in import_scope]
    assert installed == (import_scope if CURRENT else [])


def test_tf_estimator_is_tensorflow_estimator_2_15():
    assert tf.estimator.Estimator.__module__.startswith("tensorflow_estimator.")
    assert tf.compat.v1.estimator.RunConfig is tf.estimator.RunConfig
    assert issubclass(tf.compat.v1.estimator.tpu.TPUEstimator, tf.compat.v1.estimator.Estimator)


def test_v1_dense_layer_and_lstm_cell_keep_tf_1_variable_names():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None, 3, 4])
        tf.compat.v1.layers.dense(x[:, 0], 5, name="dense")
        cell = tf.compat.v1.nn.rnn_cell.BasicLSTMCell(6)
        tf.compat.v1.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        names = sorted(v.name for v in tf.compat.v1.global_variables())
    assert names == ["dense/bias:0", "dense/kernel:0", "rnn/basic_lstm_cell/bias:0",
                     "rnn/basic_lstm_cell/kernel:0"]


@pytest.mark.slow
def test_canned_estimator_trains_with_user_keras_untouched(tmp_path):
    columns = [tf.feature_column.numeric_column("x", shape=[2])]
    estimator = tf.estimator.DNNClassifier([4], columns, model_dir=str(tmp_path))

    def input_fn():
        features = {"x": np.random.RandomState(0).rand(16, 2).astype(np.float32)}
        return tf.data.Dataset.from_tensors((features, np.arange(16) % 2)).repeat(2)

    estimator.train(input_fn, steps=2)
    assert estimator.get_variable_value("global_step") == 2
    if CURRENT:
        assert tf.keras.__name__.startswith("keras.")  # Keras 3, not tf-keras.


def test_tpu_stand_in_names_the_piece_when_used():
    from tensorflow.python.tpu import tpu_embedding  # Late: loads TensorFlow.

    if not CURRENT:  # TensorFlow's own module, as tensorflow-estimator found it.
        assert tpu_embedding.TableConfig.__module__ == "tensorflow.python.tpu.tpu_embedding"
        return
    with pytest.raises(NotImplementedError, match=r"^TPU embedding tables \(TPUEstimator's "
                                                  r"EmbeddingConfigSpec\) is not available: "
                                                  r".*Received: tensorflow\.python\.tpu\."
                                                  r"tpu_embedding\.TableConfig$"):
        tpu_embedding.TableConfig()


def test_keras_3_model_refused_by_model_to_estimator_in_one_line(tmp_path):
    model = tf.keras.Sequential([tf.keras.Input([3]), tf.keras.layers.Dense(2)])
    if not CURRENT:  # tf.keras is Keras 2, whose models convert.
        model.compile("sgd", "mse")
        assert tf.keras.estimator.model_to_estimator(keras_model=model,
                                                     model_dir=str(tmp_path)).model_dir
        return
    with pytest.raises(ValueError, match=r"^keras_model must be a tf-keras model for "
                                         r"model_to_estimator .*TF_USE_LEGACY_KERAS=1 .*"
                                         r"Received: keras_model=keras\..*Sequential"):
        tf.keras.estimator.model_to_estimator(keras_model=model)


@pytest.mark.slow
def test_tf_keras_model_converted_by_model_to_estimator(tmp_path):
    """tf-keras on 2.16+; on 2.15 ``tf.keras`` is the same Keras 2."""
    if CURRENT:
        import tf_keras  # Late: loads Keras.
    else:
        tf_keras = tf.keras
    model = tf_keras.Sequential([tf_keras.layers.Dense(2, input_shape=[3], name="logits")])
    model.compile("sgd", tf_keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    estimator = tf.keras.estimator.model_to_estimator(keras_model=model,
                                                      model_dir=str(tmp_path))
    features = {model.input_names[0]: np.ones([4, 3], np.float32)}
    estimator.train(lambda: tf.data.Dataset.from_tensors((features, np.zeros([4]))), steps=1)
    assert estimator.latest_checkpoint().endswith("model.ckpt-1")
