"""Any TF1 checkpoint into a Keras model, by a mapping file: the mapping mode of migrate.

    python -m estimator_dist.migrate --checkpoint DIR_OR_PREFIX --mapping FILE \\
        --keras-model MODULE:FUNCTION --output OUT [--keras tf-keras] [--overwrite]

For model_fns that ``estimator_dist`` did not write. ``FUNCTION()`` builds the Keras
model (uncompiled, weights built), a ``tf.keras`` model (a ``tf_keras`` one with
``--keras tf-keras`` on TensorFlow 2.16+); the mapping file (JSON, or YAML unless it ends in
``.json``) says where each of its weights comes from:

    weights:                      # Keras "layer/weight" -> checkpoint variable name
      hidden/kernel: dense/kernel
      hidden/bias: dense/bias
    basic_lstm_cells:             # Keras LSTM layer -> a BasicLSTMCell's variable scope
      lstm: {scope: rnn/basic_lstm_cell, forget_bias: 1.0}
    ignore: [ema/*]               # checkpoint variables meant to be left behind (globs)

A Keras weight is named ``LAYER/WEIGHT``: the layer's name and the weight's last name
component (``kernel``, ``recurrent_kernel``, ``bias``, ``gamma``, ``moving_mean``, ...).
A ``basic_lstm_cells`` entry fills the layer's ``kernel``, ``recurrent_kernel`` and
``bias`` from the cell's ``kernel`` and ``bias`` by the rules of ``_keras_lstm``: the
kernel is split at the input rows, the gate blocks reordered [i, j, f, o] -> [i, f, j, o]
and ``forget_bias`` (default ``model_fns.LSTM_FORGET_BIAS``, 1.0 as in BasicLSTMCell)
added to the forget block.

The conversion is all or nothing: every Keras weight must get a checkpoint variable of
its shape, every named variable must exist, and every checkpoint variable must be used
or ignored (the global step and optimizer slots are ignored by themselves). Otherwise
one error names all of them; the checkpoint is only read.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import importlib
import os
from typing import Any

from estimator_dist import config_files
from estimator_dist.errors import UsageError

_SECTIONS = ("weights", "basic_lstm_cells", "ignore")
_LSTM_KEYS = ("scope", "forget_bias")
# Training bookkeeping a Keras model never holds: left behind without being listed.
_BOOKKEEPING = ("global_step", "beta1_power", "beta2_power", "*/Adam", "*/Adam_1",
                "*/Momentum", "*/Adagrad", "*/RMSProp", "*/RMSProp_1", "*/Ftrl", "*/Ftrl_1",
                "*/ExponentialMovingAverage")


@dataclasses.dataclass(frozen=True)
class Mapping:
    """A checked mapping file."""

    weights: dict[str, str]  # Keras "layer/weight" -> checkpoint variable.
    basic_lstm_cells: dict[str, tuple[str, float]]  # Keras LSTM layer -> (scope, forget_bias).
    ignore: tuple[str, ...]  # Globs of checkpoint variables to leave behind.


@dataclasses.dataclass(frozen=True)
class Report:
    """What a conversion did, and what stops it (empty ``problems``: it went through)."""

    assigned: dict[str, str]  # Keras "layer/weight" -> its source, e.g. "logits/kernel".
    left_behind: tuple[str, ...]  # Checkpoint variables not used, by the ignore rules.
    unmapped_weights: tuple[str, ...]  # Keras weights no entry fills.
    unused_variables: tuple[str, ...]  # Checkpoint variables neither used nor ignored.
    missing_variables: tuple[str, ...]  # Variables the mapping names that the checkpoint lacks.
    shape_mismatches: tuple[str, ...]  # "keras weight (shape) <- variable (shape)".

    @property
    def problems(self) -> str:
        parts = [("Keras weights without a checkpoint variable", self.unmapped_weights),
                 ("checkpoint variables neither mapped nor ignored", self.unused_variables),
                 ("variables missing from the checkpoint", self.missing_variables),
                 ("shape mismatches", self.shape_mismatches)]
        return "; ".join(f"{what}: {', '.join(names)}" for what, names in parts if names)

    def lines(self) -> list[str]:
        """The report as lines of text, one per Keras weight and one per leftover."""
        lines = [f"  {weight:<40} <- {source}" for weight, source in self.assigned.items()]
        return lines + [f"  left behind: {name}" for name in self.left_behind]


def _check_str_dict(name: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise UsageError(f"{name} must map names to checkpoint variable names (strings). "
                         f"Received: {name}={value!r}")
    return dict(value)


def _lstm_entry(layer: str, entry: Any) -> tuple[str, float]:
    """(scope, forget_bias); the forget bias defaults to the one ``model_fns`` runs with."""
    import model_fns  # Late: loads TensorFlow.

    if isinstance(entry, str):
        entry = {"scope": entry}
    forget_bias = entry.get("forget_bias", model_fns.LSTM_FORGET_BIAS) if isinstance(
        entry, dict) else None
    if (not isinstance(entry, dict) or set(entry) - set(_LSTM_KEYS)
            or not isinstance(entry.get("scope"), str)
            or not isinstance(forget_bias, (int, float))):
        raise UsageError(
            f"basic_lstm_cells.{layer} must be a scope name or {{scope: NAME, forget_bias: "
            f"NUMBER}}. Received: basic_lstm_cells.{layer}={entry!r}")
    return entry["scope"], float(forget_bias)


def check_mapping(values: Any) -> Mapping:
    """A ``Mapping`` from the dict read from a mapping file.

    Raises:
      UsageError: an unknown section, or an entry of the wrong type.
    """
    if not isinstance(values, dict):
        raise UsageError(f"mapping must be a dict with sections {', '.join(_SECTIONS)}. "
                         f"Received: mapping={values!r}")
    unknown = sorted(set(values) - set(_SECTIONS))
    if unknown:
        raise UsageError(f"mapping sections must be among {', '.join(_SECTIONS)}. "
                         f"Received: {', '.join(unknown)}")
    ignore = values.get("ignore") or []
    if not isinstance(ignore, list) or not all(isinstance(g, str) for g in ignore):
        raise UsageError(f"ignore must be a list of variable names or globs. "
                         f"Received: ignore={ignore!r}")
    cells = values.get("basic_lstm_cells") or {}
    if not isinstance(cells, dict):
        raise UsageError(f"basic_lstm_cells must map Keras LSTM layers to cell scopes. "
                         f"Received: basic_lstm_cells={cells!r}")
    return Mapping(weights=_check_str_dict("weights", values.get("weights") or {}),
                   basic_lstm_cells={k: _lstm_entry(k, v) for k, v in cells.items()},
                   ignore=tuple(ignore))


def load_mapping(path: str | os.PathLike) -> Mapping:
    """The ``Mapping`` in the JSON or YAML file ``path``."""
    return check_mapping(config_files.load_file(path))


def checkpoint_path(checkpoint: str) -> str:
    """The checkpoint prefix of ``checkpoint``: a directory (its latest) or a prefix."""
    import tensorflow as tf  # Late: loads TensorFlow.

    path = tf.train.latest_checkpoint(checkpoint) if os.path.isdir(checkpoint) else checkpoint
    if path is None or not os.path.exists(f"{path}.index"):
        raise UsageError("checkpoint must be a checkpoint prefix or a directory holding one. "
                         f"Received: checkpoint={checkpoint!r}")
    return path


def call_function(name: str, spec: str) -> Any:
    """Calls the function ``spec`` names (``MODULE:FUNCTION``, the flag ``name``) without
    arguments; returns what it returns."""
    module_name, _, function_name = spec.partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError, ValueError) as error:
        raise UsageError(f"{name} must be MODULE:FUNCTION of an importable function. "
                         f"Received: {name}={spec!r} ({error})") from None
    return function()


def build_keras_model(spec: str, keras: str = "keras") -> Any:
    """Calls the ``MODULE:FUNCTION`` named by ``spec``; returns the Keras model it builds,
    which must be a model of the Keras ``keras`` names (``keras_conversion.keras_module``)."""
    from estimator_dist.conversion import keras_conversion

    keras_module = keras_conversion.keras_module(keras)
    model = call_function("keras_model", spec)
    if not isinstance(model, keras_module.Model):
        name = "tf_keras" if keras_module.__name__.split(".")[0] == "tf_keras" else "tf.keras"
        raise UsageError(f"keras_model must return a {name}.Model (keras "
                         f"{keras!r}). Received: keras_model={spec!r} returning "
                         f"{type(model).__module__}.{type(model).__name__}")
    return model


def _weight_name(layer: Any, weight: Any) -> str:
    return f"{layer.name}/{weight.name.split(':')[0].split('/')[-1]}"


def _sources(mapping: Mapping, reader: Any) -> dict[str, tuple[str, Any, list[str]]]:
    """Keras weight name -> (source description, value or None, variables read)."""
    from estimator_dist.conversion import _keras_lstm  # Late: loads TensorFlow.

    sources: dict[str, tuple[str, Any, list[str]]] = {
        name: (name_in_ckpt, None, [name_in_ckpt])
        for name, name_in_ckpt in mapping.weights.items()}
    for layer_name, (scope, forget_bias) in mapping.basic_lstm_cells.items():
        names = [f"{scope}/kernel", f"{scope}/bias"]
        if not all(reader.has_tensor(n) for n in names):
            for weight in ("kernel", "recurrent_kernel", "bias"):
                sources[f"{layer_name}/{weight}"] = (scope, None, names)
            continue
        kernel, bias = (reader.get_tensor(n) for n in names)
        units = bias.shape[0] // 4
        values = _keras_lstm.keras_lstm_weights(kernel, bias, input_dim=kernel.shape[0] - units,
                                                forget_bias=forget_bias)
        for weight, value in zip(("kernel", "recurrent_kernel", "bias"), values):
            sources[f"{layer_name}/{weight}"] = (f"{scope} (BasicLSTMCell)", value, names)
    return sources


def convert_checkpoint(model: Any, mapping: Mapping, checkpoint: str) -> Report:
    """Copies the checkpoint's variables into ``model`` as ``mapping`` says.

    Args:
      model: the Keras model (weights built).
      mapping: a ``Mapping``.
      checkpoint: a checkpoint prefix or directory; only read.

    Returns:
      The ``Report``; the weights are set only when its ``problems`` are empty.
    """
    import tensorflow as tf  # Late: loads TensorFlow.

    reader = tf.train.load_checkpoint(checkpoint_path(checkpoint))
    shapes = reader.get_variable_to_shape_map()
    sources = _sources(mapping, reader)
    weights = {_weight_name(layer, w): w for layer in model.layers for w in layer.weights}
    missing: set[str]
    assigned, values, mismatches, missing, used = {}, {}, [], set(), set()
    for name, weight in weights.items():
        if name not in sources:
            continue
        source, value, read = sources[name]
        used.update(read)
        missing.update(n for n in read if n not in shapes)
        if any(n not in shapes for n in read):
            continue
        value = reader.get_tensor(source) if value is None else value
        if tuple(value.shape) != tuple(weight.shape):
            mismatches.append(f"{name} {tuple(weight.shape)} <- {source} {tuple(value.shape)}")
            continue
        assigned[name], values[name] = source, value
    unmapped = [n for n in weights if n not in sources]
    unknown = [n for n in sources if n not in weights]
    left = [n for n in sorted(shapes) if n not in used]
    ignored = [n for n in left if any(fnmatch.fnmatchcase(n, g)
                                      for g in mapping.ignore + _BOOKKEEPING)]
    report = Report(assigned=assigned, left_behind=tuple(ignored),
                    unmapped_weights=tuple(unmapped + [f"{n} (no such Keras weight)"
                                                       for n in unknown]),
                    unused_variables=tuple(n for n in left if n not in ignored),
                    missing_variables=tuple(sorted(missing)),
                    shape_mismatches=tuple(mismatches))
    if not report.problems:
        for name, value in values.items():
            weights[name].assign(value)
    return report


def convert_or_raise(model: Any, mapping: Mapping, checkpoint: str) -> Report:
    """``convert_checkpoint``, raising one ``UsageError`` that names every problem."""
    report = convert_checkpoint(model, mapping, checkpoint)
    if report.problems:
        raise UsageError(f"mapping must give every Keras weight a checkpoint variable of its "
                         f"shape and use or ignore every variable. Received: {report.problems}")
    return report
