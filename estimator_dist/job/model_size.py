"""A model's size, bounded before its graph is built.

Building a graph allocates no weights, so a model far too large for the machine passes
``scratch_graph.check_params`` and fails only when the session initializes its variables (an
out-of-memory kill, or minutes of swapping); a graph of 100,000 layers takes many minutes
just to build. Both are refused first, from the params alone: at most ``MAX_LAYERS``
layers, and a parameter count whose training state fits in physical memory.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

from estimator_dist.errors import UsageError

MAX_LAYERS = 1_000
# float32 weights, their gradients, and Adam's two slots: the least a training step holds.
BYTES_PER_PARAMETER = 4 * 4
_SIZE_PARAMS = {"dense": ("hidden_units", "num_classes"),
                "lstm": ("num_units", "num_layers", "num_classes", "num_outputs")}


def _ints(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values)


def _dense_count(params: Mapping[str, Any], x_width: int) -> int:
    units = params.get("hidden_units")
    if not isinstance(units, list) or not _ints(*units, params.get("num_classes")):
        return 0  # The model_fn's own check names a bad value.
    widths = [x_width, *units, params["num_classes"]]
    return sum(a * b + b for a, b in zip(widths, widths[1:]))


def _lstm_count(params: Mapping[str, Any], x_width: int) -> int:
    units: Any  # Of any kind until checked.
    layers: Any
    units, layers = params.get("num_units"), params.get("num_layers", 1)
    outputs: Any = params.get("num_classes") or params.get("num_outputs", 1)
    if not _ints(units, layers, outputs):
        return 0
    first = 4 * units * (x_width + units) + 4 * units
    return first + (layers - 1) * (8 * units * units + 4 * units) + units * outputs + outputs


_COUNTS = {"dense": _dense_count, "lstm": _lstm_count}


def parameter_count(model: str, params: Mapping[str, Any], x_width: int) -> int:
    """The trainable parameters of built-in ``model`` with ``params`` (resolved) and ``x`` of
    ``x_width`` values per step; 0 when a param is not of its kind."""
    return _COUNTS[model](params, x_width)


def physical_memory() -> int | None:
    """This machine's physical memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return None


def check(model: str, params: Mapping[str, Any], x_width: int, memory: int | None = None) -> None:
    """Refuses params of more than ``MAX_LAYERS`` layers, or of more parameters than
    ``memory`` (default: this machine's) holds for training.

    Raises:
      UsageError: naming the params, the bound and the size.
    """
    layers = params.get("hidden_units") if model == "dense" else params.get("num_layers")
    count_layers: Any = len(layers) if isinstance(layers, list) else layers
    if _ints(count_layers) and count_layers > MAX_LAYERS:
        name = "hidden_units" if model == "dense" else "num_layers"
        raise UsageError(f"params.{name} must give at most {MAX_LAYERS:,} layers (a graph of "
                         f"more takes many minutes to build). Received: {count_layers:,} layers")
    memory = memory or physical_memory()
    count = parameter_count(model, params, x_width)
    if memory is None or count * BYTES_PER_PARAMETER <= memory:
        return
    given = ", ".join(f"{name}={_short(params[name])}" for name in _SIZE_PARAMS[model]
                      if name in params)
    raise UsageError(
        f"params must give a model whose training fits in memory ({BYTES_PER_PARAMETER} bytes "
        f"a parameter: float32 weights, gradients and two optimizer slots; "
        f"{memory / 2**30:,.1f} GiB on this machine). Received: {given} ({count:,} "
        f"parameters, {count * BYTES_PER_PARAMETER / 2**30:,.1f} GiB)")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:40] + f"... ({len(value):,} items)"
