"""``tensorflow.python.estimator``, the alias package TensorFlow 2.16 removed.

TensorFlow 2.15 ships ``tensorflow/python/estimator/``: five packages and 26 modules, each
module a copy of one tensorflow-estimator module's names (``from tensorflow_estimator.
python.estimator.X import *`` with every name but the dunder ones, single-underscore
names included), and ``keras`` the copy of ``keras_lib``. Libraries built on Estimator
import from there (``from tensorflow.python.estimator.canned import head``). This serves
the same modules under the same names, built the same way from the unmodified
tensorflow-estimator, by a finder on ``sys.meta_path`` that answers these names only.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, Sequence

PACKAGE = "tensorflow.python.estimator"
_SOURCE = "tensorflow_estimator.python.estimator"
# TensorFlow 2.15's packages and modules under PACKAGE (relative names), and the
# tensorflow-estimator module each module copies where its name differs.
PACKAGES = ("", "canned", "export", "inputs", "inputs.queues")
MODULES = (
    "canned.baseline", "canned.dnn", "canned.dnn_linear_combined", "canned.head",
    "canned.linear", "canned.metric_keys", "canned.optimizers", "canned.parsing_utils",
    "canned.prediction_keys", "estimator", "estimator_lib", "export.export",
    "export.export_lib", "export.export_output", "exporter", "gc", "inputs.inputs",
    "inputs.numpy_io", "inputs.pandas_io", "inputs.queues.feeding_functions",
    "inputs.queues.feeding_queue_runner", "keras", "model_fn", "run_config", "training",
    "util",
)
_RENAMED = {"keras": "keras_lib"}


def module_names() -> tuple[str, ...]:
    """Every module and package this serves, by full name."""
    return tuple(f"{PACKAGE}.{name}".rstrip(".") for name in PACKAGES + MODULES)


def _relative(fullname: str) -> str:
    return fullname[len(PACKAGE):].lstrip(".")


class _AliasLoader(importlib.abc.Loader):
    """Builds one alias module as TensorFlow 2.15's file of that name does."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # The default module.

    def exec_module(self, module: types.ModuleType) -> None:
        relative = _relative(module.__name__)
        if relative in PACKAGES:
            return
        name = _RENAMED.get(relative, relative)
        source = importlib.import_module(f"{_SOURCE}.{name}")
        attributes: Any = vars(module)
        attributes[name.rpartition(".")[2]] = source
        attributes["_HAS_DYNAMIC_ATTRIBUTES"] = True
        attributes.update({key: value for key, value in vars(source).items()
                           if not key.startswith("__")})


class _Finder(importlib.abc.MetaPathFinder):
    """Answers the names of TensorFlow 2.15's ``tensorflow.python.estimator`` only."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if not (fullname == PACKAGE or fullname.startswith(PACKAGE + ".")):
            return None
        relative = _relative(fullname)
        if relative not in PACKAGES and relative not in MODULES:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(),
                                              is_package=relative in PACKAGES)


def install() -> None:
    """Serves ``tensorflow.python.estimator.*`` from now on (idempotent)."""
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.append(_Finder())
