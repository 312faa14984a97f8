"""A user's function named as the user would find it: module, qualified name, file:line.

Errors about an input_fn or a model_fn name the function, because the one that must change
is often not in the user's script: a library's input helper returns an inner function
(``input_fn_tfrecord.<locals>.input_fn``), a lambda wraps it, a ``functools.partial`` binds
its arguments. ``describe`` says which function it is and where its code starts;
``closure_value`` reads one free variable of a wrapper (Estimator hands a strategy
``lambda input_context: self._call_input_fn(input_fn, mode, input_context)``).
"""
from __future__ import annotations

import functools
import inspect
from typing import Any


def _location(function: Any) -> str:
    """`` (file:line)`` where ``function``'s code starts, or an empty string (a builtin)."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    return f" ({code.co_filename}:{code.co_firstlineno})" if code is not None else ""


def _name(function: Any) -> str:
    """``module.qualname`` of a function, method or class."""
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None) or getattr(function, "__name__", None)
    if qualname is None:
        return repr(function)
    return f"{module}.{qualname}" if module else qualname


def describe(fn: Any) -> str:
    """``fn`` as ``module.qualname (file:line)``: a partial as
    ``functools.partial(module.qualname) (file:line)``, a bound method by its class's
    method, a callable object as ``module.Class instance`` with its ``__call__``'s place."""
    if isinstance(fn, functools.partial):
        return f"functools.partial({_name(fn.func)}){_location(fn.func)}"
    if inspect.ismethod(fn):
        return f"{_name(fn.__func__)}{_location(fn.__func__)}"
    if inspect.isfunction(fn) or inspect.isbuiltin(fn) or inspect.isclass(fn):
        return f"{_name(fn)}{_location(fn)}"
    call = getattr(type(fn), "__call__", None)
    return f"{_name(type(fn))} instance{_location(call) if call is not None else ''}"


def closure_value(fn: Any, name: str) -> Any:
    """The value of free variable ``name`` in function ``fn``'s closure, or None."""
    code, cells = getattr(fn, "__code__", None), getattr(fn, "__closure__", None)
    if code is None or not cells or name not in code.co_freevars:
        return None
    try:
        return cells[code.co_freevars.index(name)].cell_contents
    except ValueError:  # An empty cell: the variable is not bound yet.
        return None
