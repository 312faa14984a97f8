"""``tf.estimator`` and ``tf.compat.v1.estimator``, which TensorFlow 2.16 stopped providing.

Up to 2.15 TensorFlow's API loaded tensorflow-estimator's generated API modules lazily as
``tf.estimator`` (its v2 API) and ``tf.compat.v1.estimator`` (its v1 API). This binds the
same two modules of the unmodified tensorflow-estimator 2.15.0 again, also as
``tf.compat.v2.estimator``, so that ``tf.estimator.SessionRunHook`` at a program's module
level resolves once ``estimator_dist`` is imported; and in ``sys.modules`` under the names
2.15's import statements reach (``tensorflow.estimator``, ``tensorflow.compat.v1.estimator``,
``tensorflow.compat.v2.estimator`` and their subpackages, such as
``tensorflow.compat.v1.estimator.tpu``), so that ``from tensorflow.compat.v1.estimator
import RunConfig`` resolves too. Needs the other restoring mends first (tensorflow-estimator
does not import without them).
"""
from __future__ import annotations

import importlib
import sys
import types

_API = {
    "v1": "tensorflow_estimator.python.estimator.api._v1.estimator",
    "v2": "tensorflow_estimator.python.estimator.api._v2.estimator",
}


def install() -> None:
    """Binds tensorflow-estimator's API modules where TensorFlow 2.15 had them (idempotent)."""
    import tensorflow as tf  # Late: loads TensorFlow.

    v1, v2 = (importlib.import_module(_API[version]) for version in ("v1", "v2"))
    tf.estimator = v2
    for outer in (tf.compat.v1, tf.compat.v2):  # tf.compat.v2.compat.v1.estimator, ...
        outer.compat.v1.estimator = v1
        outer.compat.v2.estimator = v2
    tf.compat.v2.estimator = v2
    tf.compat.v1.estimator = v1
    for name, module in (("tensorflow.estimator", v2), ("tensorflow.compat.v2.estimator", v2),
                         ("tensorflow.compat.v1.estimator", v1)):
        _register(name, module)


def _register(name: str, module: types.ModuleType) -> None:
    """Puts ``module`` and its API subpackages in ``sys.modules`` under ``name`` (and
    ``name.sub``), where no module of that name is already."""
    sys.modules.setdefault(name, module)
    for attribute, value in vars(module).items():
        if isinstance(value, types.ModuleType) and \
                value.__name__ == f"{module.__name__}.{attribute}":
            _register(f"{name}.{attribute}", value)
