"""What doctor reports of the installation: the interpreter-start hook, what TensorFlow 2.15
installed beside itself (TensorBoard: ``tf.summary.scalar`` in a model_fn), and two
TensorFlow distributions over one folder."""
import glob
import importlib.metadata
import re

import numpy as np
import pytest
import tensorflow as tf

import estimator_dist_startup
from estimator_dist import installation


def test_startup_hook_state_names_the_file_and_the_switch(tmp_path, monkeypatch):
    assert installation.startup_hook_state([str(tmp_path)]).startswith(
        "not installed (estimator_dist_startup.pth in no site-packages folder)")
    (tmp_path / estimator_dist_startup.PTH).write_text("import estimator_dist_startup\n")
    monkeypatch.setenv(estimator_dist_startup.VARIABLE, "0")
    assert installation.startup_hook_state([str(tmp_path)]) == (
        f"off (ESTIMATOR_DIST_STARTUP_HOOK=0), installed as {tmp_path}/"
        "estimator_dist_startup.pth")
    monkeypatch.delenv(estimator_dist_startup.VARIABLE)
    state = installation.startup_hook_state([str(tmp_path)])
    assert state.endswith(f"installed as {tmp_path}/estimator_dist_startup.pth")
    assert state.startswith("steps aside (this TensorFlow ships tf.estimator)" if
                            tf.__version__.startswith("2.15.") else "on: tf.estimator in ")


def _requirements():
    """TensorFlow's distribution's requirements here, by name (markers applied)."""
    from packaging.requirements import Requirement

    name = next(n for n in ("tensorflow", "tensorflow-cpu") if _installed(n))
    found = [Requirement(r) for r in importlib.metadata.requires(name)]
    return {r.name.lower().replace("_", "-"): r for r in found
            if r.marker is None or r.marker.evaluate({"extra": ""})}


def _installed(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def test_tensorflow_requires_beside_itself_what_docs_install_md_says():
    """TensorFlow 2.15 required TensorBoard, Keras 2 and tensorflow-io-gcs-filesystem;
    2.16+ requires Keras 3 and neither of the others."""
    required = _requirements()
    if tf.__version__.startswith("2.15."):
        assert {"tensorboard", "tensorflow-io-gcs-filesystem"} <= set(required)
        assert "2.15.0" in required["keras"].specifier
    else:
        assert not {"tensorboard", "tensorflow-io-gcs-filesystem"} & set(required)
        assert "2.15.0" not in required["keras"].specifier


def test_companion_missing_names_what_fails():
    found = installation.companions(lambda name: "2.21.0" if name == "tf-keras" else None,
                                    release="2.21")
    assert found == {"tensorboard": "not installed: tf.summary.* in a model_fn, Estimator's "
                                    "own summaries fail",
                     "tf-keras": "2.21.0"}
    assert installation.companions(lambda name: None, release="2.15")["tf-keras"] == (
        "not needed: TensorFlow 2.15's tf.keras is Keras 2")


def test_companions_installed_here():
    """setup.py requires them on Python 3.12+ (current TensorFlow); TensorFlow 2.15 itself
    requires TensorBoard, and its Keras 2 is its own ``keras`` there."""
    found = installation.companions()
    assert not [state for state in found.values() if state.startswith("not installed")], found


def test_two_tensorflow_distributions_over_one_folder_is_one_line():
    fault = installation.tensorflow_distributions_fault(
        {"tensorflow": ["tensorflow-cpu", "tensorflow", "tensorflow"], "numpy": ["numpy"]})
    assert re.fullmatch(r"tensorflow/ must come from one distribution: tensorflow \S+, "
                        r"tensorflow-cpu \S+ installed over one another; pip uninstall "
                        r"tensorflow tensorflow-cpu, then install one \(docs/install\.md, "
                        r"\"Libraries that pin an older TensorFlow\"\)\. Received: 2 "
                        r"distributions", fault)
    assert installation.tensorflow_distributions_fault({"tensorflow": ["tensorflow"]}) is None


def test_one_tensorflow_distribution_here():
    assert installation.tensorflow_distributions_fault() is None


@pytest.mark.both_ends
@pytest.mark.slow
def test_summary_scalar_in_a_model_fn_trains(tmp_path):
    """TensorFlow 2.16+ serves ``tf.summary`` from TensorBoard (TBNotInstalledError
    without it)."""

    def model_fn(features, labels, mode):
        weights = tf.compat.v1.get_variable("w", [2, 1])
        loss = tf.reduce_mean(tf.square(tf.matmul(features["x"], weights) - labels))
        tf.summary.scalar("v2_loss", loss)
        tf.compat.v1.summary.scalar("v1_loss", loss)
        step = tf.compat.v1.train.get_or_create_global_step()
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss, step)
        return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn():
        features = {"x": np.ones([4, 2], np.float32)}
        return tf.data.Dataset.from_tensors((features, np.ones([4, 1], np.float32))).repeat()

    estimator = tf.estimator.Estimator(model_fn, model_dir=str(tmp_path),
                                       config=tf.estimator.RunConfig(save_summary_steps=1))
    estimator.train(input_fn, steps=2)
    tags = {value.tag for path in glob.glob(str(tmp_path / "events.out.tfevents.*"))
            for event in tf.compat.v1.train.summary_iterator(path)
            for value in event.summary.value}
    assert "v1_loss" in tags, tags
