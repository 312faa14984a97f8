"""``tf.estimator`` back on TensorFlow 2.16 and later, as soon as TensorFlow is imported:
the import hook that installs the mends of scope "import".

``install_on_import()`` (called when ``estimator_dist`` is imported) installs them now
when TensorFlow is imported already, else puts an ``AfterImport`` finder first on
``sys.meta_path`` that installs them once TensorFlow's import has run, and a
``BeforeImport`` one that imports TensorFlow before tensorflow-estimator's own package runs
(``import tensorflow_estimator`` first: it then finds the mends it needs in place). An
``ESTIMATOR_DIST_MENDS_OFF`` naming no mend is said in one line on stderr as they are
installed (and refused where a strategy's mends are applied). Nothing on TensorFlow 2.15.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any, Callable

from estimator_dist.mends import registry, releases
from estimator_dist.mends.catalogue import MENDS


def _install_import_scope() -> None:
    """Installs the import mends, or, while Keras's own import is under way, at the first
    use of ``tf.estimator`` (``_install_at_first_use``). What would refuse them is said in
    one line on stderr instead, here where no caller could handle a refusal (an ``import
    tensorflow``); the calls that apply the other mends refuse it (the CLI in one line)."""
    if _keras_importing():
        _install_at_first_use()
        return
    fault = registry.unknown_off_names()
    if fault:
        print(f"estimator_dist: {fault} (the import mends leave those names out)",
              file=sys.stderr)
    fault = releases.version_fault()
    if fault:
        print(f"estimator_dist: {fault} (tf.estimator is not restored)", file=sys.stderr)
        return
    for mend in MENDS.values():
        if mend.scope == "import":
            registry.apply(mend.name)


class AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs ``then`` once module ``name`` has been imported (then steps aside). Finders of
    one name chain: each loads the module through the next one's loader."""

    def __init__(self, name: str, then: Callable[[], object] | None) -> None:
        self._then: Any  # None where a subclass's exec_module does not call it.
        self._loader: Any
        self._name, self._then, self._loader = name, then, None

    def find_spec(self, fullname: str, path: Any,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self._name or self._loader is not None:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        self._loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        self._then()


class BeforeImport(AfterImport):
    """Runs ``then`` once module ``name`` is found, before its code runs (then steps
    aside)."""

    def exec_module(self, module: types.ModuleType) -> None:
        self._then()
        self._loader.exec_module(module)


def _keras_importing() -> bool:
    """Whether Keras's own import is under way (``import keras`` before TensorFlow, which
    Keras imports): TensorFlow's Keras attributes (``tf.losses``, which
    tensorflow-estimator reads as it is imported) cannot load until it ends."""
    spec = getattr(sys.modules.get("keras"), "__spec__", None)
    return bool(getattr(spec, "_initializing", False))


class _FirstUse:
    """A TensorFlow module's ``__getattr__`` (PEP 562) while the import mends wait for
    Keras's import to end: its first ``estimator`` installs them, then is given from the
    module at ``path`` (``tf``, ``tf.compat.v1``: installing may rebind those)."""

    def __init__(self, path: tuple[str, ...]) -> None:
        self._path = path

    def __call__(self, name: str) -> Any:
        if name != "estimator" or _keras_importing():
            raise AttributeError(f"module {'.'.join(('tensorflow', *self._path))!r} has no "
                                 f"attribute {name!r}")
        _install_if_waiting()
        return getattr(_module_at(self._path), name)


class _FirstImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """While the import mends wait for Keras's import to end: ``import
    tensorflow.estimator`` (``tensorflow.compat.v1.estimator``, ``.v2``, a subpackage)
    installs them and gives the module they put in ``sys.modules`` under that name."""

    _NAMES = ("tensorflow.estimator", "tensorflow.compat.v1.estimator",
              "tensorflow.compat.v2.estimator")

    def __init__(self) -> None:
        self._specs: dict[int, Any] = {}

    def find_spec(self, fullname: str, path: Any,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if not any(fullname == n or fullname.startswith(f"{n}.") for n in self._NAMES) \
                or _keras_importing():
            return None
        return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        _install_if_waiting()
        module = sys.modules.get(spec.name)
        if module is None:  # The mends did not install.
            raise ModuleNotFoundError(f"No module named {spec.name!r}", name=spec.name)
        self._specs[id(module)] = module.__spec__  # Python sets this spec's on it.
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__spec__ = self._specs.pop(id(module))


_PARENTS = ((), ("compat", "v1"), ("compat", "v2"))  # tf, tf.compat.v1, tf.compat.v2
_deferred = False  # Whether the import mends wait for a first use (_install_at_first_use).


def _module_at(path: tuple[str, ...]) -> Any:
    """``tf``'s module at ``path`` (``("compat", "v1")``: ``tf.compat.v1``)."""
    module: Any = sys.modules["tensorflow"]
    for part in path:
        module = getattr(module, part)
    return module


def _estimator_parents() -> list[tuple[tuple[str, ...], types.ModuleType]]:
    """(path from ``tf``, where missing attributes are looked up) of each module that gets
    an ``estimator``; TensorFlow wraps ``tf.compat.v1``: the wrapped module."""
    modules = {path: _module_at(path) for path in _PARENTS}
    return [(path, getattr(module, "_tfmw_wrapped_module", module))
            for path, module in modules.items()]


def _install_at_first_use() -> None:
    """Waits to install the import mends until ``tf.estimator`` (or
    ``tf.compat.v1.estimator``, ``tf.compat.v2.estimator``) is first read or imported, or
    tensorflow-estimator first imported, after Keras's import (which imported TensorFlow)
    has ended. A program that never uses Estimator never installs them."""
    global _deferred
    _deferred = True
    for path, lookup in _estimator_parents():
        vars(lookup).setdefault("__getattr__", _FirstUse(path))
    if not any(isinstance(f, _FirstImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _FirstImport())


def _install_if_waiting() -> None:
    """Installs the import mends that ``_install_at_first_use`` left waiting, if any."""
    global _deferred
    if not _deferred:
        return
    _deferred = False
    for _, lookup in _estimator_parents():
        if isinstance(vars(lookup).get("__getattr__"), _FirstUse):
            del vars(lookup)["__getattr__"]
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _FirstImport)]
    _install_import_scope()


def _import_tensorflow() -> None:
    """Imports TensorFlow before tensorflow-estimator's package runs, and installs the
    import mends left waiting for Keras's import to end."""
    importlib.import_module("tensorflow")
    _install_if_waiting()


def _waiting(kind: type, name: str) -> bool:
    return any(type(f) is kind and getattr(f, "_name", None) == name  # noqa: E721
               for f in sys.meta_path)


def install_on_import() -> None:
    """Gives TensorFlow 2.16 and later ``tf.estimator`` back (mends of scope "import"): now
    when TensorFlow is imported, else as soon as it (or tensorflow-estimator) is. Nothing
    on TensorFlow 2.15."""
    release = releases.tensorflow_release()
    if release is None or release in releases.LEGACY:
        return
    if "tensorflow" in sys.modules:
        _install_import_scope()
        return
    if not _waiting(AfterImport, "tensorflow"):
        sys.meta_path.insert(0, AfterImport("tensorflow", _install_import_scope))
    if "tensorflow_estimator" not in sys.modules and \
            not _waiting(BeforeImport, "tensorflow_estimator"):
        sys.meta_path.insert(0, BeforeImport("tensorflow_estimator", _import_tensorflow))
