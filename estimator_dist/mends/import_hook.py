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
import importlib.util
import sys
from typing import TYPE_CHECKING, Any, Callable

from estimator_dist.mends import registry, releases
from estimator_dist.mends.catalogue import MENDS

if TYPE_CHECKING:
    import importlib.machinery
    import types


def _install_import_scope() -> None:
    """Installs the import mends. What would refuse them is said in one line on stderr
    instead, here where no caller could handle a refusal (an ``import tensorflow``); the
    calls that apply the other mends refuse it (the CLI in one line)."""
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


def _import_tensorflow() -> None:
    importlib.import_module("tensorflow")


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
