"""Nothing outside ``estimator_dist/mends/`` reaches into TensorFlow's or Estimator's private
code (docs/architecture.md, "Where each kind of change goes"; docs/mends.md).

Every module of ``estimator_dist`` (but ``mends/``), ``model_fns`` and ``input_fns`` is
parsed, and each of these is a finding:

* an import of a private module (``tensorflow.python``, ``tensorflow_estimator.python``,
  Keras's ``src``), or its name as a string (``importlib.import_module``);
* ``x._name``, and ``getattr``/``setattr``/``hasattr``/``delattr`` of ``"_name"``, where
  ``x`` is neither ``self``/``cls`` nor a name of this project (a module, class or function
  it imports or defines), ``super()`` included;
* ``self._name`` (or ``cls._name``) in a class that derives from TensorFlow, where
  TensorFlow's classes in its MRO use ``_name`` themselves: reading or replacing their
  state (a ``CheckpointSaverHook``'s ``_summary_writer``, an ``InputContext``'s
  ``_num_replicas_in_sync``). The module is imported to know the classes' MRO.
"""
import ast
import functools
import importlib
import inspect
import pathlib
import re
import textwrap

import pytest

_ROOT = pathlib.Path(__file__).resolve().parents[2]
_PROJECT = ("estimator_dist", "model_fns", "input_fns")
_PRIVATE_MODULE = re.compile(r"(tensorflow\.python|tensorflow_estimator\.python|keras\.src|"
                             r"tf_keras\.src)(\.\w+)*")
# The packages whose classes' private state the third kind of finding is about.
_TENSORFLOW = ("tensorflow", "tensorflow_estimator", "keras", "tf_keras")
_ATTRIBUTE_FUNCTIONS = ("getattr", "setattr", "hasattr", "delattr")
# The allowed exceptions: names with a leading underscore that are Python's public API.
_PYTHON_API = {
    "_asdict": "a namedtuple's documented method",
    "_replace": "a namedtuple's documented method",
    "_make": "a namedtuple's documented method",
    "_fields": "a namedtuple's documented attribute",
    "os._exit": "Python's documented exit without clean-up (hooks/watchdog.py ends a "
                "process whose training thread is stuck in TensorFlow)",
}


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_names(tree):
    """The names a module binds to this project's code: what it imports from the project,
    and the classes and functions it defines at its top."""
    own = {"self", "cls"} | {node.name for node in tree.body if isinstance(
        node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            own |= {(a.asname or a.name).split(".")[0] for a in node.names
                    if a.name.split(".")[0] in _PROJECT}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _PROJECT:
            own |= {a.asname or a.name for a in node.names}
    return own


def _python_api(receiver, name):
    return name in _PYTHON_API or f"{ast.unparse(receiver)}.{name}" in _PYTHON_API


def _imports(node):
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module:
        return [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return []


def _static_findings(tree, own):
    """(line, what) for private modules and other objects' private attributes."""
    for node in ast.walk(tree):
        for module in _imports(node):
            if _PRIVATE_MODULE.fullmatch(module):
                yield node.lineno, f"imports {module}"
                break
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and _PRIVATE_MODULE.fullmatch(node.value)):
            yield node.lineno, f"names module {node.value!r}"
        if (isinstance(node, ast.Attribute) and _private(node.attr)
                and not _python_api(node.value, node.attr)):
            if not (isinstance(node.value, ast.Name) and node.value.id in own):
                yield node.lineno, f"{ast.unparse(node.value)}.{node.attr}"
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _ATTRIBUTE_FUNCTIONS and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str) and _private(node.args[1].value)):
            target = node.args[0]
            if not (isinstance(target, ast.Name) and target.id in own):
                yield node.lineno, f"{node.func.id}({ast.unparse(target)}, {node.args[1].value!r})"


@functools.lru_cache(maxsize=None)
def _names_of_class(cls):
    """The private names a class of TensorFlow uses: its members, and the ``self._name``
    attributes its source reads or sets."""
    names = {name for name in vars(cls) if _private(name)}
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # A class built in C, or without source.
        return frozenset(names)
    tree = ast.parse(textwrap.dedent(source))
    names |= {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
              and _private(node.attr)}
    return frozenset(names)


def _external(cls):
    """The classes of TensorFlow (Estimator, Keras) in ``cls``'s MRO."""
    return [k for k in cls.__mro__ if k.__module__.split(".")[0] in _TENSORFLOW]


def _inherited_findings(tree, namespace):
    """(line, what) for ``self._name`` in a class deriving from TensorFlow, where
    ``_name`` is a private name of TensorFlow's classes in its MRO."""
    module_name = namespace.get("__name__")
    bodies = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    for name in bodies:
        cls = namespace.get(name)
        if not inspect.isclass(cls):
            continue
        external = _external(cls)
        theirs = set().union(*map(_names_of_class, external))
        # The class's own body, and that of each mixin of this module it is made of.
        mine = [bodies[k.__name__] for k in cls.__mro__
                if k.__module__ == module_name and k.__name__ in bodies]
        for body in mine:
            for node in ast.walk(body):
                if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                        and node.value.id in ("self", "cls") and node.attr in theirs):
                    owner = next(k.__qualname__ for k in external
                                 if node.attr in _names_of_class(k))
                    yield node.lineno, f"{node.value.id}.{node.attr} (of {owner})"


def private_accesses(source, namespace):
    """Sorted "line: what" findings of ``source``, whose module namespace is
    ``namespace`` (what executing it gave)."""
    tree = ast.parse(source)
    found = set(_static_findings(tree, _own_names(tree)))
    found |= set(_inherited_findings(tree, namespace))
    return [f"{line}: {what}" for line, what in sorted(found)]


def _outside_the_mends():
    paths = (p for folder in _PROJECT for p in sorted((_ROOT / folder).rglob("*.py")))
    return [str(p.relative_to(_ROOT)) for p in paths
            if p.relative_to(_ROOT).parts[:2] != ("estimator_dist", "mends")]


def _module_name(path):
    parts = pathlib.Path(path).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@pytest.mark.parametrize("path", _outside_the_mends())
def test_private_tensorflow_is_reached_only_by_the_mends(path):
    """No exceptions: what a module outside mends/ needs of TensorFlow's private code is a
    function of ``mends/internals.py`` or a mend of the registry."""
    namespace = vars(importlib.import_module(_module_name(path)))
    assert private_accesses((_ROOT / path).read_text(encoding="utf-8"), namespace) == []


_SAMPLE = '''
import importlib
import tensorflow as tf
from tensorflow.python.training import basic_session_run_hooks


class Saver(tf.compat.v1.train.CheckpointSaverHook):
    def begin(self):
        super().begin()
        self._summary_writer = None
        self._mine = 1

    def end(self, session):
        super()._save(session, 0)


def workers(strategy):
    importlib.import_module("tensorflow_estimator.python.estimator.estimator")
    return strategy.extended._num_workers, getattr(strategy, "_extended", None)
'''


def _executed(source):
    namespace = {"__name__": "sample"}
    exec(compile(source, "sample", "exec"), namespace)  # The sample is this test's own source.
    return namespace


def test_checker_reports_each_kind_of_private_access():
    assert private_accesses(_SAMPLE, _executed(_SAMPLE)) == [
        "4: imports tensorflow.python.training",
        "10: self._summary_writer (of CheckpointSaverHook)",
        "14: super()._save",
        "18: names module 'tensorflow_estimator.python.estimator.estimator'",
        "19: getattr(strategy, '_extended')",
        "19: strategy.extended._num_workers",
    ]


_CLEAN = '''
import collections
import os

import tensorflow as tf

from estimator_dist import mends

Pair = collections.namedtuple("Pair", "a b")


class Hook(tf.compat.v1.train.SessionRunHook):
    def __init__(self):
        self._steps = 0


def run(pair):
    if mends._INSTALLED:
        os._exit(1)  # Python's own, allowed by name.
    return pair._replace(a=1), Hook._steps if hasattr(Hook, "_steps") else None
'''


def test_checker_allows_own_names_and_python_api():
    assert private_accesses(_CLEAN, _executed(_CLEAN)) == []
