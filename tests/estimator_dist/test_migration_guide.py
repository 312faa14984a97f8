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

from estimator_dist import events, migrate, train
from tests.conftest import REPO_ROOT

_GUIDE = os.path.join(REPO_ROOT, "docs", "migration.md")
_TOLERANCE = 1e-5
_PAIR = ["Estimator:", "TF2:"]
_BLOCK = re.compile(r"(?:^(Estimator:|TF2:)\n\n)?^```(\w*)\n(.*?)^```$", re.M | re.S)

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
}


def _read_guide():
    with open(_GUIDE, encoding="utf-8") as file:
        return file.read()


def _sections(text):
    """Section title -> [(label or None, language, code)], in the page's order."""
    sections = {}
    for part in re.split(r"^## ", text, flags=re.M)[1:]:
        title, _, body = part.partition("\n")
        sections[title.strip()] = [m.groups() for m in _BLOCK.finditer(body)]
    return sections


class _Guide:
    """Runs the page's Python blocks in order, each once, in one namespace."""

    def __init__(self, text):
        self.sections = _sections(text)
        self.namespace = {"__name__": "migration_guide"}
        self._done = []

    def run_to(self, title):
        """Runs every section up to and including ``title``; returns the namespace."""
        for name, blocks in self.sections.items():
            if name not in self._done:
                for label, language, code in blocks:
                    if language == "python":
                        exec(compile(code, f"{_GUIDE} [{name}: {label or 'setup'}]", "exec"),
                             self.namespace)
                self._done.append(name)
            if name == title:
                return self.namespace
        raise KeyError(title)


@pytest.fixture(scope="module")
def guide():
    return _Guide(_read_guide())


# --- The page's shape -------------------------------------------------------------------------


def test_guide_pairs_each_have_an_estimator_then_a_tf2_block():
    sections = _sections(_read_guide())
    pairs = {t: [label for label, _, _ in b] for t, b in sections.items() if t in _CHECKS}
    assert pairs == {title: _PAIR for title in _CHECKS}
    labelled = {t for t, b in sections.items() if any(label for label, _, _ in b)}
    assert labelled == set(_CHECKS)  # No pair is left unchecked.


def test_guide_names_only_tests_that_exist():
    named = set(re.findall(r"`(test_\w+)`", _read_guide()))
    from tests.estimator_dist import test_migrate  # pylint: disable=import-outside-toplevel

    defined = {n for n in list(globals()) + dir(test_migrate) if n.startswith("test_")}
    assert named and named <= defined, named - defined
    assert set(_CHECKS.values()) <= named


def test_guide_commands_parse_with_the_clis():
    shell = [code for blocks in _sections(_read_guide()).values()
             for _, language, code in blocks if language == "bash"]
    commands = [shlex.split(line) for code in shell for line in code.splitlines()]
    parsers = {"estimator_dist.train": train.train_parser(),
               "estimator_dist.migrate": migrate.migrate_parser()}
    assert [c[:3] for c in commands] == [["python", "-m", "estimator_dist.train"],
                                        ["python", "-m", "estimator_dist.migrate"]]
    for command in commands:
        parsers[command[2]].parse_args(command[3:])


# --- The pairs agree --------------------------------------------------------------------------


def _trained_estimator(names, model_dir):
    """The guide's model_fn, trained one step on the first 32 blobs."""
    estimator = tf.estimator.Estimator(names["model_fn"], model_dir=model_dir,
                                       params={"learning_rate": 0.01})
    data = ({"x": names["features"][:32]}, names["labels"][:32])
    estimator.train(lambda: tf.data.Dataset.from_tensors(data), steps=1)
    return estimator


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


def test_keras_model_built_before_an_estimator_call_breaks_after_it(guide, tmp_path):
    names = guide.run_to("model_fn → Keras model")
    x = names["features"][:4]
    early = names["make_model"]()
    early({"x": x})
    _trained_estimator(names, str(tmp_path))
    with pytest.raises(ValueError, match="Your Layer or Model is in an invalid state"):
        early({"x": x})
    assert names["make_model"]()({"x": x}).shape == (4, 3)
    early({"x": x})  # Building a layer outside the graph made it usable again.


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
    second = model({"x": inputs["x"][:, 5:], "state_c": first["state_c"],
                    "state_h": first["state_h"]})
    # Predicting builds the Estimator's graph, after which the Keras model is not called.
    predicted = list(names["lstm_estimator"].predict(
        lambda: tf.data.Dataset.from_tensors(inputs)))
    for name in ("logits", "state_c", "state_h"):
        expected = np.stack([p[name] for p in predicted])
        np.testing.assert_allclose(outputs[name], expected, atol=_TOLERANCE)
        np.testing.assert_allclose(second[name], expected, atol=_TOLERANCE)
