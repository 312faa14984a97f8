"""tensorflow-estimator's ``tf.keras`` as the Keras it was written for (tf-keras), alone.

On TensorFlow 2.16 and later ``tf.keras`` is Keras 3 unless ``TF_USE_LEGACY_KERAS=1`` sends
the whole process to tf-keras. tensorflow-estimator 2.15 reaches Keras only as
``tf.keras`` / ``tf.compat.v1.keras`` / ``tf.compat.v2.keras`` after ``import tensorflow as
tf`` (54 modules, read), some at import time (``class _DNNModel(tf.keras.Model)``), and needs
Keras 2's API: ``DenseFeatures``, ``optimizers.legacy``, the v1 ``keras.layers``. Under Keras 3
canned estimators fail.

This routes those modules, and only them, to tf-keras: a module of the
``tensorflow_estimator`` package is executed with an ``__import__`` that answers ``import
tensorflow`` with a view of TensorFlow whose ``keras`` (and ``compat.v1.keras``,
``compat.v2.keras``) are tf-keras's, every other name being TensorFlow's own object. The
user's ``tf.keras`` stays Keras 3. Installed before tensorflow-estimator is first
imported (a finder on ``sys.meta_path``, for this package's modules only).
"""
from __future__ import annotations

import builtins
import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, Callable, Mapping, Sequence

_PACKAGE = "tensorflow_estimator"
_KERAS = {"v1": "tf_keras.api._v1.keras", "v2": "tf_keras.api._v2.keras"}


class _View(types.ModuleType):
    """A module seen through ``routes``: names routed elsewhere, the rest its own."""

    def __init__(self, module: types.ModuleType, routes: Mapping[str, Callable[[], Any]]) -> None:
        super().__init__(module.__name__, module.__doc__)
        self._module, self._routes = module, routes

    def __getattr__(self, name: str) -> Any:
        route = self._routes.get(name)
        value = route() if route else getattr(self._module, name)
        if route:
            setattr(self, name, value)
        return value

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._module)) | set(self._routes))


def _keras(version: str) -> Callable[[], types.ModuleType]:
    return lambda: importlib.import_module(_KERAS[version])


def tensorflow_view() -> types.ModuleType:
    """TensorFlow as tensorflow-estimator should see it: Keras names go to tf-keras."""
    import tensorflow as tf  # Late: loads TensorFlow.

    compat = _View(tf.compat, {
        "v1": lambda: _View(tf.compat.v1, {"keras": _keras("v1")}),
        "v2": lambda: _View(tf.compat.v2, {"keras": _keras("v2")}),
    })
    return _View(tf, {"keras": _keras("v2"), "compat": lambda: compat})


_VIEW: list[types.ModuleType] = []


# __import__'s own signature, builtins' names included.
def _import(name: str, globals: Mapping[str, object] | None = None,
            locals: Mapping[str, object] | None = None, fromlist: Sequence[str] = (),
            level: int = 0) -> types.ModuleType:
    if name == "tensorflow" and not fromlist and level == 0:
        if not _VIEW:
            _VIEW.append(tensorflow_view())
        return _VIEW[0]
    return builtins.__import__(name, globals, locals, fromlist, level)


_BUILTINS = dict(vars(builtins), __import__=_import)


class _Loader(importlib.abc.Loader):
    """The module's own loader, with the routing ``__import__`` in its builtins."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__builtins__ = _BUILTINS
        self._loader.exec_module(module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds tensorflow-estimator's modules as usual and wraps their loaders."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.split(".")[0] != _PACKAGE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


def install() -> None:
    """Routes every tensorflow-estimator module imported from now on (idempotent).

    Raises:
      RuntimeError: tensorflow-estimator was imported before, with ``tf.keras`` as it was.
      ImportError: tf-keras is not installed.

    The modules a failed ``import tensorflow_estimator`` left behind (TensorFlow 2.16+
    refuses it without the other import mends) are dropped, so that it imports afresh.
    """
    if any(isinstance(finder, _Finder) for finder in sys.meta_path):
        return
    if _imported(sys.modules.get(_PACKAGE)):
        raise RuntimeError(
            "tensorflow_estimator must be imported after estimator_dist on TensorFlow 2.16 "
            "and later (its Keras is routed to tf-keras as it loads): import estimator_dist "
            f"first. Received: {_PACKAGE} already in sys.modules")
    try:  # A missing tf-keras is reported here, not at the first canned estimator.
        importlib.import_module(_KERAS["v2"])
    except ImportError as error:
        import tensorflow as tf  # Late: loads TensorFlow.

        release = ".".join(tf.__version__.split(".")[:2])
        raise ImportError(
            "tf-keras must be installed for tf.estimator on TensorFlow 2.16+ (tensorflow-"
            f"estimator's Keras): pip install 'tf-keras~={release}.0'. Received: {error}"
        ) from None
    for name in [name for name in sys.modules if name.startswith(_PACKAGE + ".")]:
        del sys.modules[name]  # A failed import's modules, which saw Keras 3 as tf.keras.
    sys.meta_path.insert(0, _Finder())


def _imported(package: Any) -> bool:
    """Whether tensorflow-estimator's package has run already (an import that is under way,
    whose package code runs after the mends, is not)."""
    return package is not None and not getattr(package.__spec__, "_initializing", False)
