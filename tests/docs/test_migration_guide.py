"""docs/migration.md runs: every code block, in order, and each Estimator/TF2 pair agrees.

The blocks are read from the markdown itself, so the page cannot drift from what runs.
They execute top to bottom in one namespace, as a reader runs them; each test runs the
page up to its section (once per module) and then checks the names the blocks defined.
"""
import os
import re
import shlex

import numpy as np
import pytest
import tensorflow as tf
import yaml

from estimator_dist.commands import migrate, train
from estimator_dist.job import events
from estimator_dist.conversion import checkpoint_mapping
from tests import markdown_blocks
from tests.support import REPO_ROOT

# The guide's blocks run in order in one Runner (a module fixture): one worker runs them.
pytestmark = pytest.mark.xdist_group("guide")

_GUIDE = os.path.join(REPO_ROOT, "docs", "migration.md")
_TOLERANCE = 1e-5
_PAIR = ["Estimator:", "TF2:"]
# tf.keras is Keras 3 on TensorFlow 2.16+ (the Estimator's v1 layers are then tf-keras's).
_KERAS_3 = not tf.__version__.startswith("2.15.")

# Pair section -> the test below that checks it (the page names the same test).
_CHECKS = {
    "model_fn → Keras model": "test_model_fn_pair_gives_the_same_logits",
    "input_fn → tf.data": "test_input_fn_pair_yields_the_same_batches",
    "RunConfig + MirroredStrategy → strategy.scope() + fit":
        "test_mirrored_pair_both_train_with_a_falling_loss",
    "train_and_evaluate → fit with validation":
        "test_train_and_evaluate_pair_both_classify_the_eval_blobs",
    "Export → model.save": "test_export_pair_gives_the_same_logits",
    "BasicLSTMCell with explicit state → Keras LSTM with return_state":
        "test_lstm_pair_gives_the_same_logits_and_state",
    "Custom training loop: MirroredStrategy without fit":
        "test_ctl_mirrored_pair_reaches_the_estimator_accuracy",
    "Custom training loop: two workers (MultiWorkerMirroredStrategy)":
        "test_ctl_multi_worker_pair_reaches_the_estimator_accuracy",
    "Keras fit on two workers, resumed (BackupAndRestore)":
        "test_keras_multi_worker_pair_resumes_where_it_stopped",
    "Keras fit on TPUs (TPUStrategy), validated on CPU":
        "test_keras_tpu_pair_reaches_the_estimator_accuracy",
    "Custom training loop: stateful LSTM streams":
        "test_ctl_stream_pair_reaches_the_estimator_rmse",
}
# The tolerances docs/migration.md states for the custom training loops.
_ACCURACY_GAP = 0.05
_RMSE_RATIO = 1.3


def _read_guide():
    return markdown_blocks.read(_GUIDE)


_sections = markdown_blocks.sections


@pytest.fixture(scope="module")
def guide():
    return markdown_blocks.Runner(_GUIDE)


# --- The page's shape -------------------------------------------------------------------------


def test_guide_pairs_each_have_an_estimator_then_a_tf2_block():
    sections = _sections(_read_guide())
    pairs = {t: [label for label, _, _ in b if label] for t, b in sections.items()
             if t in _CHECKS}
    assert pairs == {title: _PAIR for title in _CHECKS}
    labelled = {t for t, b in sections.items() if any(label for label, _, _ in b)}
    assert labelled == set(_CHECKS)  # No pair is left unchecked.


def test_guide_names_only_tests_that_exist():
    named = set(re.findall(r"`(test_\w+)`", _read_guide()))
    from tests.estimator_dist import test_migrate
    from tests.estimator_dist.commands import test_migrate_safety
    from tests.estimator_dist.job import test_engines
    from tests.estimator_dist.conversion import (test_canned, test_canned_legacy_program,
                                                 test_canned_portable, test_canned_training,
                                                 test_checkpoint_mapping)

    modules = (test_migrate, test_checkpoint_mapping, test_engines, test_migrate_safety,
               test_canned, test_canned_training, test_canned_legacy_program,
               test_canned_portable)
    defined = {n for n in list(globals()) + [n for m in modules for n in dir(m)]
               if n.startswith("test_")}
    assert named and named <= defined, named - defined
    assert set(_CHECKS.values()) <= named


def test_guide_commands_parse_with_the_clis():
    shell = [code for blocks in _sections(_read_guide()).values()
             for _, language, code in blocks if language == "bash"]
    commands = [shlex.split(line) for code in shell for line in code.splitlines()]
    parsers = {"estimator_dist.train": train.train_parser(),
               "estimator_dist.migrate": migrate.migrate_parser()}
    assert [c[2] for c in commands] == ["estimator_dist.train", "estimator_dist.migrate",
                                       "estimator_dist.migrate"] + [
                                           "estimator_dist.train"] * 3 + [
                                           "estimator_dist.migrate"] * 2
    assert all(c[:2] == ["python", "-m"] for c in commands)
    for command in commands:
        parsers[command[2]].parse_args(command[3:])


def test_guide_mapping_example_is_the_fixture_mapping():
    blocks = _sections(_read_guide())["Your own model_fn: a mapping file"]
    (example,) = [code for _, language, code in blocks if language == "yaml"]
    assert checkpoint_mapping.check_mapping(yaml.safe_load(example)) == \
        checkpoint_mapping.load_mapping(os.path.join(REPO_ROOT, "tests", "fixtures", "tf1_lstm",
                                                     "mapping.yaml"))


# --- The pairs agree --------------------------------------------------------------------------


def _trained_estimator(names, model_dir):
    """The guide's model_fn, trained one step on the first 32 blobs."""
    estimator = tf.estimator.Estimator(names["model_fn"], model_dir=model_dir,
                                       params={"learning_rate": 0.01})
    data = ({"x": names["features"][:32]}, names["labels"][:32])
    estimator.train(lambda: tf.data.Dataset.from_tensors(data), steps=1)
    return estimator


@pytest.mark.slow
def test_model_fn_pair_gives_the_same_logits(guide, tmp_path):
    names = guide.run_to("model_fn → Keras model")
    x = names["features"][:32]
    estimator = _trained_estimator(names, str(tmp_path))
    predicted = estimator.predict(lambda: tf.data.Dataset.from_tensors({"x": x}))
    expected = np.stack([p["logits"] for p in predicted])
    model = names["make_model"]()
    for layer in ("hidden", "logits"):
        model.get_layer(layer).set_weights([estimator.get_variable_value(f"{layer}/kernel"),
                                            estimator.get_variable_value(f"{layer}/bias")])
    np.testing.assert_allclose(model({"x": x}), expected, atol=_TOLERANCE)


@pytest.mark.slow
def test_keras_model_built_before_an_estimator_call_breaks_after_it(guide, tmp_path):
    """TF 2.15: the Estimator's v1 layers are tf.keras's own, and building them in a graph
    breaks the Keras models built before. TF 2.16+: they are tf-keras's, the user's Keras 3
    model shares nothing with them and keeps working. docs/migration.md states both."""
    names = guide.run_to("model_fn → Keras model")
    x = names["features"][:4]
    early = names["make_model"]()
    before = early({"x": x})
    _trained_estimator(names, str(tmp_path))
    if not _KERAS_3:
        with pytest.raises(ValueError, match="Your Layer or Model is in an invalid state"):
            early({"x": x})
        assert names["make_model"]()({"x": x}).shape == (4, 3)
    np.testing.assert_array_equal(early({"x": x}), before)  # 2.15: usable again, as built.


def test_input_fn_pair_yields_the_same_batches(guide):
    names = guide.run_to("input_fn → tf.data")
    epoch = len(names["features"]) // 32
    estimator_batches = list(names["input_fn"]().take(epoch).as_numpy_iterator())
    keras_batches = list(names["dataset"].as_numpy_iterator())
    assert len(keras_batches) == epoch
    for (estimator_x, estimator_y), (keras_x, keras_y) in zip(estimator_batches, keras_batches):
        np.testing.assert_array_equal(estimator_x["x"], keras_x["x"])
        np.testing.assert_array_equal(estimator_y, keras_y)


@pytest.mark.slow
def test_mirrored_pair_both_train_with_a_falling_loss(guide):
    names = guide.run_to("RunConfig + MirroredStrategy → strategy.scope() + fit")
    assert names["config"].train_distribute.num_replicas_in_sync == 2
    assert names["strategy"].num_replicas_in_sync == 2
    losses = [value for _, value in events.scalars(names["estimator"].model_dir)["loss"]]
    assert len(losses) >= 5 and losses[-1] < 0.75 * losses[0]
    # fit splits each global batch of 32 across the two replicas.
    per_replica = names["strategy"].experimental_distribute_dataset(names["dataset"])
    x, _ = next(iter(per_replica))
    assert [t.shape[0] for t in names["strategy"].experimental_local_results(x["x"])] == [16, 16]
    keras_losses = names["history"].history["loss"]
    assert keras_losses[-1] < 0.75 * keras_losses[0]


@pytest.mark.slow
def test_train_and_evaluate_pair_both_classify_the_eval_blobs(guide):
    names = guide.run_to("train_and_evaluate → fit with validation")
    assert names["metrics"]["global_step"] == 80
    assert names["metrics"]["accuracy"] > 0.9
    assert names["val_accuracy"] > 0.9


@pytest.mark.slow
def test_export_pair_gives_the_same_logits(guide):
    names = guide.run_to("Export → model.save")
    x = names["eval_features"]
    exported = names["exported"](x=tf.constant(x))["logits"]
    np.testing.assert_allclose(names["reloaded"]({"x": x}), exported, atol=_TOLERANCE)


@pytest.mark.slow
def test_lstm_pair_gives_the_same_logits_and_state(guide):
    names = guide.run_to("BasicLSTMCell with explicit state → Keras LSTM with return_state")
    rng = np.random.default_rng(7)
    inputs = {"x": names["waves"][:8],
              "state_c": rng.normal(size=(8, 16)).astype(np.float32),
              "state_h": rng.normal(size=(8, 16)).astype(np.float32)}
    model = names["lstm_model"]
    outputs = model(inputs)
    first = model({**inputs, "x": inputs["x"][:, :5]})
    # Keras 3 takes no dict mixing NumPy arrays and tensors: the carried state is a tensor.
    second = model({"x": tf.constant(inputs["x"][:, 5:]), "state_c": first["state_c"],
                    "state_h": first["state_h"]})
    # Predicting builds the Estimator's graph, after which the Keras model is not called.
    predicted = list(names["lstm_estimator"].predict(
        lambda: tf.data.Dataset.from_tensors(inputs)))
    for name in ("logits", "state_c", "state_h"):
        expected = np.stack([p[name] for p in predicted])
        np.testing.assert_allclose(outputs[name], expected, atol=_TOLERANCE)
        np.testing.assert_allclose(second[name], expected, atol=_TOLERANCE)


@pytest.mark.slow
def test_ctl_mirrored_pair_reaches_the_estimator_accuracy(guide):
    names = guide.run_to("Custom training loop: MirroredStrategy without fit")
    estimator_accuracy, ctl_accuracy = (names["estimator_metrics"]["accuracy"],
                                        names["ctl_metrics"]["accuracy"])
    assert min(estimator_accuracy, ctl_accuracy) > 0.9
    assert abs(estimator_accuracy - ctl_accuracy) <= _ACCURACY_GAP
    losses = names["ctl_losses"]
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    restored = names["make_model"]()
    tf.train.Checkpoint(model=restored).restore(
        names["ctl_manager"].latest_checkpoint).expect_partial()
    x = {"x": names["eval_features"]}
    np.testing.assert_allclose(restored(x), names["ctl_model"](x), atol=_TOLERANCE)


@pytest.mark.slow
@pytest.mark.multi_process
def test_ctl_multi_worker_pair_reaches_the_estimator_accuracy(guide):
    names = guide.run_to("Custom training loop: two workers (MultiWorkerMirroredStrategy)")
    estimator_accuracy = names["mw_estimator_metrics"]["accuracy"]
    assert names["mw_estimator_metrics"]["global_step"] == 80
    assert min(estimator_accuracy, names["mw_ctl_accuracy"]) > 0.9
    assert abs(estimator_accuracy - names["mw_ctl_accuracy"]) <= _ACCURACY_GAP


@pytest.mark.slow
@pytest.mark.multi_process
def test_keras_multi_worker_pair_resumes_where_it_stopped(guide):
    names = guide.run_to("Keras fit on two workers, resumed (BackupAndRestore)")
    assert names["resumed_step"] == 100
    assert names["keras_resumed_output"].count("epochs run [2, 3]") == 2  # Both workers.
    assert names["mw_keras_accuracy"] > 0.9
    if _KERAS_3:  # The page's reason for tf-keras on TF 2.16+: Keras 3's fit fails there.
        worker = names["WORKER_FILES"]["keras_worker.py"]
        choice = worker[worker.index("if Version("):worker.index("options = ")]
        names["WORKER_FILES"]["keras3_worker.py"] = worker.replace(choice,
                                                                   "keras = tf.keras\n\n")
        with pytest.raises(RuntimeError, match="Attempt to convert a value"):
            workdir = names["workdir"]
            names["run_two_workers"]("keras3_worker.py", f"{workdir}/blobs.npz",
                                     f"{workdir}/keras3_backup", f"{workdir}/keras3_mw.h5",
                                     "-1", timeout=120)


@pytest.mark.slow
def test_keras_tpu_pair_reaches_the_estimator_accuracy(guide):
    names = guide.run_to("Keras fit on TPUs (TPUStrategy), validated on CPU")
    assert names["no_tpu_error"] == "Please provide a TPU Name to connect to."
    tpu_model = names["tpu_model"]  # Compiled the way a TPU runs it (public on both Kerases).
    assert isinstance(tpu_model.loss, tf.keras.losses.SparseCategoricalCrossentropy)
    assert tpu_model.jit_compile and int(np.asarray(tpu_model.steps_per_execution)) == 8
    estimator_accuracy = names["tpu_estimator_metrics"]["accuracy"]
    keras_accuracy = names["tpu_history"].history["val_accuracy"][-1]
    assert min(estimator_accuracy, keras_accuracy) > 0.9
    assert abs(estimator_accuracy - keras_accuracy) <= _ACCURACY_GAP


@pytest.mark.slow
def test_ctl_stream_pair_reaches_the_estimator_rmse(guide):
    names = guide.run_to("Custom training loop: stateful LSTM streams")
    estimator_rmse, ctl_rmse = (names["stream_estimator_metrics"]["rmse"],
                                names["stream_ctl_rmse"])
    assert max(estimator_rmse, ctl_rmse) < np.std(names["series"]) / 3
    assert max(estimator_rmse, ctl_rmse) <= _RMSE_RATIO * min(estimator_rmse, ctl_rmse)
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(f"{names['workdir']}/stream_ctl"))
    saved_c = [k for k in reader.get_variable_to_shape_map() if k.startswith("state_c/")]
    np.testing.assert_allclose(reader.get_tensor(saved_c[0]), names["train_state"][1].numpy())
    assert (np.abs(names["train_state"][1].numpy()).max(axis=1) > 0).all()  # Every stream.


# Last in the module: on TensorFlow 2.15 its Estimator calls break the Keras models the
# guide's earlier sections built in this process.
@pytest.mark.slow
@pytest.mark.both_ends
def test_guide_canned_example_runs():
    """The canned estimators' worked example runs by itself: it asserts that the Keras
    model and its saved SavedModel give the Estimator's predictions."""
    blocks = _sections(_read_guide())["Canned estimators: one command"]
    (example,) = [code for _, language, code in blocks if language == "python"]
    names = {"__name__": "canned_example"}
    exec(compile(example, "docs/migration.md [Canned estimators]", "exec"), names)
    assert set(names["outputs"]) >= {"logits", "probabilities", "classes"}
