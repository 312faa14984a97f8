"""A train run's checkpoint as a Keras model: ``to_keras``.

Reads the latest checkpoint in a model dir and the run recorded there (``run.json``: the
model and its params), builds the equivalent Keras model and copies the weights, so the
Keras model gives the same ``logits`` as the Estimator:

* ``dense``: inputs ``{"x"}`` [batch, dim]; outputs ``{"logits"}``. Layers ``hidden_{i}``
  (``Dense``), ``batch_norm_{i}``, ``logits``, named as in the checkpoint.
* ``lstm``: inputs ``{"x", "state_c", "state_h"}``, x [batch, time, dim] and the state
  [batch, num_layers * num_units] laid out as ``model_fns.lstm_model_fn`` lays it out;
  outputs ``{"logits", "state_c", "state_h"}``. One ``tf.keras.layers.LSTM`` per
  ``BasicLSTMCell`` (``lstm_{i}``), its weights converted as ``_keras_lstm`` describes.

Which Keras (``keras_module``): ``"keras"``, the default, builds with ``tf.keras`` (Keras 2
on TensorFlow 2.15, Keras 3 on 2.16+); ``"tf-keras"`` with Keras 2 on either end (the
tf-keras package on 2.16+, ``tf.keras`` itself on 2.15). ``save`` writes each in the form
its ``load_model`` reads back (``OUTPUT_LAYOUT``).

The model dir is only read. ``save`` writes the model whole or not at all: under a
temporary name next to the output, then renamed into place; an existing output is
replaced only when ``save`` wrote it (it holds ``MARKER``) and holds no file but those
the marker lists. ``python -m
estimator_dist.migrate`` runs both; a checkpoint of another model_fn converts through a
mapping file instead (``checkpoint_mapping``), and a canned Estimator's (``DNNClassifier``,
``LinearRegressor``, ...) through the Estimator object itself (``canned``).
"""
from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import tempfile
import zipfile
from typing import TYPE_CHECKING, Any, Mapping, Sequence, cast

from estimator_dist import models, run_record
from estimator_dist.conversion import _keras_models
from estimator_dist.conversion.eager import eagerly
from estimator_dist.errors import UsageError, check_existing_dir

if TYPE_CHECKING:
    import tensorflow as tf

_LEGACY_SUFFIXES = (".h5", ".hdf5")
# Written into every output ``save`` writes (a file in a SavedModel directory, an entry in
# a .keras zip): overwriting replaces only a path that holds it, so ``save`` never removes
# what it did not write.
MARKER = "estimator_dist_migrate.json"
_WRITER = "python -m estimator_dist.migrate"
KERAS_CHOICES = ("keras", "tf-keras")
# What ``save`` writes at OUT, by Keras; ``tf.keras.models.load_model(OUT)`` (or
# ``tf_keras.models.load_model(OUT)`` for tf-keras) reads every one back.
OUTPUT_LAYOUT = {
    "Keras 2, OUT a directory": "a Keras SavedModel, its serving_default signature keyed "
                                "by the model's input and output names",
    "Keras 2, OUT ending in .keras": "a Keras v3 file (tf.keras on TF 2.15; refused for "
                                     "the tf-keras package, which cannot read it back "
                                     "once it holds MARKER)",
    "Keras 3, OUT a directory": "Keras 3's unzipped format (config.json, metadata.json, "
                                "model.weights.h5) and, beside it, a SavedModel with the "
                                "same serving_default signature",
    "Keras 3, OUT ending in .keras": "a Keras 3 file",
}


def keras_module(keras: str = "keras") -> Any:
    """The Keras module a conversion builds with: ``keras`` is one of ``KERAS_CHOICES``.

    Raises:
      UsageError: an unknown choice, or "tf-keras" on TensorFlow 2.16+ without the tf-keras
        package.
    """
    import tensorflow as tf  # Late: loads TensorFlow.

    if keras not in KERAS_CHOICES:
        raise UsageError(f"keras must be one of {', '.join(KERAS_CHOICES)}. "
                         f"Received: keras={keras!r}")
    if keras == "keras" or not _is_keras_3(tf.keras):
        return tf.keras
    try:
        import tf_keras  # Late: loads Keras.
    except ImportError:
        raise UsageError("keras 'tf-keras' needs the tf-keras package on TensorFlow "
                         f"{tf.__version__} (pip install tf-keras). Received: no tf_keras "
                         "module") from None
    return tf_keras


def _is_keras_3(keras_or_model: Any) -> bool:
    """Whether a Keras module, or a model, is Keras 3's (not Keras 2 nor tf-keras)."""
    import keras  # Late: loads Keras.

    if not keras.__version__.startswith("2."):
        if isinstance(keras_or_model, type(keras)):
            return getattr(keras_or_model, "Model", None) is keras.Model
        return isinstance(keras_or_model, keras.Model)
    return False


def _resolve_params(builtin: models.BuiltinModel, params: Mapping[str, Any]) -> dict[str, Any]:
    """The model_fn's full params (its own resolver: its checks, its defaults), refusing
    any the Keras conversion cannot express."""
    import model_fns  # Late: loads TensorFlow.

    expressed = [n for n in builtin.params_table if n not in model_fns.TRAINING_PARAMS]
    ignored = model_fns.TRAINING_PARAMS + model_fns.TPU_ESTIMATOR_KEYS
    for name in sorted(params):
        if name not in expressed and name not in ignored:
            raise UsageError(
                f"params must be ones the Keras conversion of {builtin.name!r} expresses "
                f"({', '.join(expressed)}). Received: {name}={params[name]!r}")
    try:
        return builtin.resolve_params(params)
    except ValueError as error:
        raise UsageError(f"params must suit the {builtin.name!r} model_fn: {error}") from None


def _recorded_model(model_dir: str, model: str | None,
                    params: Mapping[str, Any] | None
                    ) -> tuple[models.BuiltinModel, Mapping[str, Any]]:
    """(built-in model, params): as given, else as recorded in the model dir's ``run.json``."""
    if model is None and params is None:
        settings = run_record.recorded_settings(model_dir)
        if "model" not in settings:
            raise UsageError(
                f"model_dir must hold the {run_record.FILENAME} of an estimator_dist.train "
                f"run (it names the model and its params). Received: model_dir={model_dir!r} "
                f"without {run_record.FILENAME}")
        model, params = settings["model"], settings.get("params", {})
    elif model is None or params is None:
        missing = "model" if model is None else "params"
        raise UsageError(f"model and params must be given together. Received: no {missing}")
    builtin = models.model_of(model)
    if not isinstance(params, dict):
        raise UsageError(f"params must be a dict. Received: params={params!r}")
    return builtin, params


def latest_checkpoint(model_dir: str) -> str:
    """The path of the latest checkpoint in ``model_dir``.

    Raises:
      UsageError: ``model_dir`` is not a directory or holds no checkpoint.
    """
    import tensorflow as tf  # Late: loads TensorFlow.

    check_existing_dir("model_dir", model_dir)
    path = tf.train.latest_checkpoint(model_dir)
    if path is None:
        raise UsageError(f"model_dir must hold a checkpoint (train into it first). "
                         f"Received: model_dir={model_dir!r} without one")
    return path


@eagerly
def to_keras(model_dir: Any, *, model: str | None = None, params: Mapping[str, Any] | None = None,
             checkpoint: str | None = None, keras: str = "keras", portable: bool = False) -> Any:
    """The Keras model equivalent to the latest checkpoint in ``model_dir``.

    Args:
      model_dir: the model dir of a train run; only read. Or a canned Estimator object
        (``DNNClassifier``, ``LinearRegressor``, ...): its model dir's latest checkpoint
        converts as ``conversion.canned`` describes.
      model, params: a built-in model's name (``models.NAMES``) and its model_fn params, for a model
        dir trained by other code than ``estimator_dist.train`` (no ``run.json``). By
        default both come from the run recorded in ``model_dir``.
      checkpoint: the checkpoint prefix to convert (default: the latest one in
        ``model_dir``, as its state file names it).
      keras: which Keras builds the model, one of ``KERAS_CHOICES`` (``keras_module``).
      portable: for a canned Estimator on Keras 3, build from Keras's own layers and ops
        only, so ``keras.models.load_model`` reads the saved model in a process without
        ``estimator_dist`` (``conversion.canned``); its features come dense.

    Returns:
      A Keras model (not compiled) with dict inputs and outputs; see the module
      docstring for their names and shapes. On TensorFlow 2.15 an Estimator call that
      builds ``tf.compat.v1.layers`` in its graph breaks the Keras models built before it
      in the same process: convert after the Estimator calls (docs/migration.md).

    Raises:
      UsageError: ``model_dir`` is missing or holds no checkpoint or no run record; the
        params name an option the conversion cannot express; the checkpoint does not
        hold the model's variables.
    """
    if not isinstance(model_dir, (str, os.PathLike)):
        return _canned_to_keras(model_dir, model, params, checkpoint, keras, portable)
    if portable:
        raise UsageError("portable must be left out for a model dir (its Keras model holds "
                         "only Keras's own layers already); it is for a canned Estimator. "
                         f"Received: portable=True, model_dir={os.fspath(model_dir)!r}")
    model_dir = os.fspath(model_dir)
    checkpoint_path = checkpoint or latest_checkpoint(model_dir)
    keras = keras_module(keras)
    builtin, params = _recorded_model(model_dir, model, params)
    params = _resolve_params(builtin, params)
    keras_model, weights = getattr(_keras_models, builtin.keras_model)(
        params, _keras_models.Checkpoint(checkpoint_path, builtin.name), keras)
    for name, values in weights.items():
        layer = keras_model.get_layer(name)
        expected = [tuple(w.shape) for w in layer.weights]
        received = [tuple(v.shape) for v in values]
        if expected != received:
            raise UsageError(
                f"checkpoint variables of layer {name!r} must have shapes {expected} to suit "
                f"the params {params}. Received: shapes {received} in "
                f"checkpoint={checkpoint_path!r}")
        layer.set_weights(values)
    return keras_model


def _canned_to_keras(estimator: Any, model: str | None, params: Mapping[str, Any] | None,
                     checkpoint: str | None, keras: str, portable: bool) -> Any:
    """``canned.to_keras``, once the arguments that only a model dir takes are absent."""
    from estimator_dist.conversion import canned

    if model is not None or params is not None or keras != "keras":
        raise UsageError("model, params and keras must be left out for a canned Estimator "
                         "(it says what it is and which Keras it is built with). Received: "
                         f"model={model!r}, params={params!r}, keras={keras!r}")
    canned.check(estimator, portable)  # Before the model dir is read.
    return canned.to_keras(estimator, checkpoint or latest_checkpoint(estimator.model_dir),
                           portable)


def _marker(path: str) -> dict[str, Any] | None:
    """The ``MARKER`` record of a migrate output at ``path`` (a dict), else None."""
    try:
        if os.path.isdir(path):
            with open(os.path.join(path, MARKER), encoding="utf-8") as file:
                text = file.read()
        elif zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                text = archive.read(MARKER).decode("utf-8")
        else:
            return None
        record = json.loads(text)
    except (OSError, KeyError, ValueError):  # No marker, or not one migrate wrote.
        return None
    return record if isinstance(record, dict) else None


def _written_by_migrate(path: str) -> bool:
    """Whether ``path`` is an output of migrate: it holds the ``MARKER``."""
    return _marker(path) is not None


def _files_under(path: str) -> list[str]:
    """Every file (and link) under the directory ``path``, relative to it."""
    return sorted(os.path.relpath(os.path.join(root, name), path)
                  for root, dirs, files in os.walk(path) for name in files + [
                      d for d in dirs if os.path.islink(os.path.join(root, d))])


# A marker that lists no files: the output holds a Keras SavedModel's files only (and, on
# TensorFlow 2.16+, Keras 3's own files beside them).
_SAVED_MODEL_FILES = re.compile(r"(saved_model|keras_metadata|fingerprint)\.pb|"
                                r"variables/variables\.(index|data-\d+-of-\d+)|"
                                r"config\.json|metadata\.json|model\.weights\.h5|"
                                + re.escape(MARKER))


def _not_written_by_migrate(path: str) -> list[str]:
    """The files of the migrate output ``path`` (a directory) that migrate did not write:
    not in the manifest its marker lists."""
    if not os.path.isdir(path):
        return []
    listed = cast(dict, _marker(path)).get("files")  # Migrate wrote it: it has a marker.
    if isinstance(listed, list):
        return [name for name in _files_under(path) if name not in listed]
    return [name for name in _files_under(path) if not _SAVED_MODEL_FILES.fullmatch(name)]


def _write_marker(path: str) -> None:
    """Writes the ``MARKER``: who wrote ``path`` and, for a directory, every file in it
    (the manifest ``--overwrite`` checks, so that it removes nothing else)."""
    record: dict[str, Any] = {"written_by": _WRITER}
    if os.path.isdir(path):
        record["files"] = sorted(_files_under(path) + [MARKER])
        with open(os.path.join(path, MARKER), "w", encoding="utf-8") as file:
            json.dump(record, file, indent=1)
    else:
        with zipfile.ZipFile(path, "a") as archive:
            archive.writestr(MARKER, json.dumps(record))


def _check_replaceable(output: str) -> None:
    if not _written_by_migrate(output):
        raise UsageError(f"output must be a new path or an earlier migrate output (one "
                         f"holding {MARKER}); migrate never replaces anything else. "
                         f"Received: output={output!r}")
    foreign = _not_written_by_migrate(output)
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        raise UsageError(f"output must hold only the files an earlier migrate wrote there "
                         f"to be replaced (--overwrite removes nothing else; move them out "
                         f"first). Received: output={output!r} also holding "
                         f"{', '.join(repr(f) for f in foreign[:3])}{more}")


def check_output(output: str | os.PathLike, overwrite: bool) -> str:
    """The real (symlinks resolved) ``output`` path, if the Keras model may go there.

    An existing ``output`` is replaced only with ``overwrite``, and only when migrate wrote
    it and it holds nothing else (the files its marker lists): anything else there (a
    model dir, a directory of runs, a file, a file added to an earlier output) is refused.
    """
    output = os.path.realpath(output)
    if output.lower().endswith(_LEGACY_SUFFIXES):
        raise UsageError("output must be a SavedModel directory or a .keras file. "
                         f"Received: output={output!r}")
    if not os.path.lexists(output):
        return output
    if not overwrite:
        raise UsageError(f"output must not exist yet (pass --overwrite to replace it). "
                         f"Received: output={output!r}")
    _check_replaceable(output)
    return output


def _remove(path: str) -> None:
    """Removes an earlier migrate output, checked again just before."""
    _check_replaceable(path)
    if os.path.isdir(path):
        shutil.rmtree(path)
    else:
        os.remove(path)


def _signatures(keras_model: Any) -> dict[str, Any]:
    """The SavedModel's signatures: the raw features' one (``_serving_signature``) as
    ``serving_default``; for a converted canned Estimator, as ``features`` beside the
    Estimator export's own (``canned.example_signatures``)."""
    from estimator_dist.conversion import canned

    examples = canned.example_signatures(keras_model)
    if not examples:
        return {"serving_default": _serving_signature(keras_model)}
    return {"features": _serving_signature(keras_model), **examples}


def _serving_signature(keras_model: Any) -> Any:
    """A signature keyed like the model's dict inputs and outputs (Keras's own keys its
    outputs by layer name), so the Estimator export's clients keep their names."""
    import tensorflow as tf  # Late: loads TensorFlow.

    specs = {name: tf.TensorSpec(tensor.shape, tensor.dtype, name=name)
             for name, tensor in keras_model.input.items()}

    @tf.function(input_signature=[specs])
    def serve(features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        return keras_model(features, training=False)

    return serve


def _save_keras_3(keras_model: Any, path: str) -> None:
    """Saves a Keras 3 model: a ``.keras`` file, or a directory that both Keras 3's
    ``load_model`` (its unzipped format) and ``tf.saved_model.load`` read."""
    # Late: loads TensorFlow.
    import keras
    import tensorflow as tf

    if path.endswith(".keras"):
        keras.saving.save_model(keras_model, path)
        return
    if "zipped" not in inspect.signature(keras.saving.save_model).parameters:
        raise UsageError(f"output must end in .keras with Keras {keras.__version__} (its "
                         "load_model reads no directory; Keras 3.5 and later do). "
                         f"Received: output={os.path.basename(path)!r}")
    keras.saving.save_model(keras_model, path, zipped=False)
    if isinstance(keras_model.input, dict):
        tf.saved_model.save(keras_model, path, signatures=_signatures(keras_model))


@eagerly
def save(keras_model: Any, output: str | os.PathLike, *, overwrite: bool = False) -> str:
    """Saves ``keras_model`` to ``output`` whole or not at all; returns the absolute path.

    ``output`` is a directory, or a Keras file when it ends in ``.keras``; what goes there
    depends on the model's Keras (``OUTPUT_LAYOUT``): a Keras 2 model's directory is a
    SavedModel, a Keras 3 model's holds Keras 3's unzipped format and a SavedModel beside
    it. The model is written under a temporary name in the same directory, then renamed.
    A model with dict inputs and outputs (as ``to_keras`` builds) gets a SavedModel
    ``serving_default`` signature with the same names as its dicts.

    Raises:
      UsageError: ``output`` names an ``.h5`` file, or exists and either is not an earlier
        migrate output (one holding ``MARKER``) or ``overwrite`` is off.
    """
    output = check_output(output, overwrite)
    if output.endswith(".keras") and type(keras_model).__module__.startswith("tf_keras."):
        # tf-keras 2.16+ reads its .keras file in place and fails once MARKER is added.
        raise UsageError("output must be a directory (a SavedModel) for a tf-keras model. "
                         f"Received: output={output!r}")
    parent = os.path.dirname(output)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(output)}.", dir=parent)
    try:
        staged = os.path.join(staging, os.path.basename(output))
        if _is_keras_3(keras_model):
            _save_keras_3(keras_model, staged)
        elif output.endswith(".keras"):
            keras_model.save(staged)
        else:  # Keras 2 writes HDF5 by default where TF2 behaviour is off.
            signatures = (_signatures(keras_model) if isinstance(keras_model.input, dict)
                          else None)
            keras_model.save(staged, save_format="tf", signatures=signatures)
        _write_marker(staged)
        if os.path.lexists(output):
            _remove(output)
        os.replace(staged, output)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return output


def new_keras_model(builtin: models.BuiltinModel, params: Mapping[str, Any],
                    x_shape: Sequence[int]) -> Any:
    """A new Keras model of the built-in model ``builtin`` (a ``models.BuiltinModel``) for
    the TF2 engines: inputs ``{"x"}`` of one example's ``x_shape``, output the logits."""
    return getattr(_keras_models, builtin.tf2_model)(params, x_shape)
