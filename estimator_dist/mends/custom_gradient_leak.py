"""Graph-mode ``tf.custom_gradient`` without a graph kept alive per use.

The defect (TensorFlow 2.15.x, checked on 2.15.1; read in
``tensorflow/python/ops/custom_gradient.py``, ``_graph_mode_decorator``): each call of a
``tf.custom_gradient`` function while building a graph registers its gradient function
under a new name, ``CustomGradient-<uid>``, in TensorFlow's process-wide gradient
registry, and never removes it. That function closes over the call's tensors, so the
registry keeps every graph that used one alive. An Estimator builds a new graph at every
``train``, ``evaluate`` and ``export`` call, so a model_fn with a ``tf.custom_gradient``
grows the process by a graph per call: a small one grew from 830 to 3,084 MB over 40
train/evaluate cycles, and the same model_fn without it stayed flat.

What ``install()`` changes: right after TensorFlow registers such a function, it moves
the function onto the graph that holds the call's ops and leaves in the registry, under
the same name, a small stand-in that finds the function through a weak reference to that
graph. When the graph is collected, a ``weakref.finalize`` removes the stand-in. While
the graph lives, every lookup TensorFlow makes (``tf.gradients``, SavedModel's saving of
custom gradients, an imported copy of the graph) finds what it found before.

It is process-wide: it replaces ``_graph_mode_decorator`` in TensorFlow's module, for
every graph of the process. ``make_run_config`` installs it (idempotent);
``uninstall()`` puts TensorFlow's function back, for graphs built afterwards.
"""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

from tensorflow.python.framework import ops
from tensorflow.python.ops import custom_gradient
from tensorflow.python.util import nest

_TF_GRAPH_MODE_DECORATOR = custom_gradient._graph_mode_decorator
_NAME_PREFIX = "CustomGradient-"
_FUNCTIONS = "_estimator_dist_custom_gradients"  # the graph's {name: gradient function}
_REGISTRY_LOCK = threading.Lock()


def _registry_entries() -> dict[str, Any]:
    return ops.gradient_registry._registry


def _gradient_names(result: Any) -> set[tuple[Any, str]]:
    """The registry names of the gradients the ops of ``result`` were built with."""
    names = set()
    for tensor in nest.flatten(result, expand_composites=True):
        op = getattr(tensor, "op", None)
        if op is None or op.type != "IdentityN":
            continue
        try:
            name = op.get_attr("_gradient_op_type").decode()
        except ValueError:
            continue
        if name.startswith(_NAME_PREFIX):
            names.add((op.graph, name))
    return names


def _stand_in(graph_ref: Callable[[], Any], name: str) -> Callable[..., Any]:
    """A registry entry that calls the gradient function kept on the graph."""

    def gradient(op: Any, *grads: Any) -> Any:
        return getattr(graph_ref(), _FUNCTIONS)[name](op, *grads)

    return gradient


def _unregister(name: str) -> None:
    with _REGISTRY_LOCK:
        _registry_entries().pop(name, None)


def _move_to_graph(graph: Any, name: str) -> None:
    """Moves the gradient function registered as ``name`` onto ``graph``."""
    with _REGISTRY_LOCK:
        entry = _registry_entries().get(name)
        if not hasattr(graph, _FUNCTIONS):
            setattr(graph, _FUNCTIONS, {})
        functions = getattr(graph, _FUNCTIONS)
        if entry is None or name in functions:
            return
        functions[name] = entry["type"]
        entry["type"] = _stand_in(weakref.ref(graph), name)
        weakref.finalize(graph, _unregister, name)


def _graph_mode_decorator(f: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """TensorFlow's ``_graph_mode_decorator``, its gradient function kept on the graph."""
    result = _TF_GRAPH_MODE_DECORATOR(f, args, kwargs)
    for graph, name in _gradient_names(result):
        _move_to_graph(graph, name)
    return result


def install() -> None:
    """Keeps graph-mode custom gradients on their graphs, process-wide (idempotent)."""
    custom_gradient._graph_mode_decorator = _graph_mode_decorator


def uninstall() -> None:
    """Puts TensorFlow's ``_graph_mode_decorator`` back, for graphs built afterwards."""
    custom_gradient._graph_mode_decorator = _TF_GRAPH_MODE_DECORATOR


def installed() -> bool:
    """Whether ``install()`` is in force."""
    return custom_gradient._graph_mode_decorator is _graph_mode_decorator
