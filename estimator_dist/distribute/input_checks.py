"""Checks on what a user's ``input_fn`` does under a distribution strategy.

Three habits of older Estimator code go wrong quietly or with a bare message under a
strategy:

* returning iterator tensors (``make_one_shot_iterator(ds).get_next()``): TensorFlow
  fails with "input_fn must return a tf.data.Dataset or a callable.";
* returning queue-based tensors (``tf.estimator.inputs.numpy_input_fn`` /
  ``pandas_input_fn``): the same bare message; ``input_fns.numpy_input_fn`` /
  ``input_fns.pandas_input_fn`` take the same arguments and return Datasets;
* ignoring ``input_context``: every replica then receives a whole batch, so the global
  batch is the input_fn's batch times the number of replicas.

An input_fn that sizes its batch by ``params["batch_size"]`` from a
``PerReplicaBatchParams`` (what ``estimator_dist.make_estimator`` hands it) is sized per
replica already and is not warned about.

Shapes are read with ``tf.compat.dimension_value`` so the checks also hold under
``tf.compat.v1.disable_v2_behavior()``, where a dimension is an (unhashable) ``Dimension``.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import tensorflow as tf

from estimator_dist import callables
from estimator_dist.errors import UsageError

_warned: set[tuple[str, int, int | None]] = set()
_batch_size_reads: list[bool] = []


class GlobalBatchWarning(UserWarning):
    """An input_fn ignores ``input_context``, so every replica gets a whole batch."""


class _WatchedInputContext(tf.distribute.InputContext):
    """An ``InputContext`` that records whether the input_fn consulted it."""

    def __init__(self, context: tf.distribute.InputContext) -> None:
        super().__init__(context.num_input_pipelines, context.input_pipeline_id,
                         context.num_replicas_in_sync)
        self.consulted = False

    def _seen(self, value: int) -> int:
        self.consulted = True
        return value

    @property
    def num_input_pipelines(self) -> int:
        return self._seen(super().num_input_pipelines)

    @property
    def input_pipeline_id(self) -> int:
        return self._seen(super().input_pipeline_id)

    @property
    def num_replicas_in_sync(self) -> int:
        return self._seen(super().num_replicas_in_sync)

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        self.consulted = True
        return super().get_per_replica_batch_size(global_batch_size)


class PerReplicaBatchParams(dict):
    """Estimator ``params`` whose ``"batch_size"`` is already the per-replica batch.

    Reading that key (the TPUEstimator habit) counts as sizing the batch per replica, so
    such an input_fn gets no ``GlobalBatchWarning``. Estimator deep-copies params before
    each input_fn call; the copies keep this type and report to the same record.
    """

    def __getitem__(self, key: Any) -> Any:
        if key == "batch_size":
            _batch_size_reads.append(True)
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default


def _static_batch_size(dataset: tf.data.Dataset) -> int | None:
    for spec in tf.nest.flatten(dataset.element_spec):
        shape = getattr(spec, "shape", None)
        if shape is not None and shape.rank:
            return tf.compat.dimension_value(shape[0])  # A Dimension under v1 behaviour.
    return None


def _queue_based(result: Any) -> bool:
    """True when ``result`` holds tensors dequeued from an input queue (queue runners)."""
    return any(getattr(t, "op", None) is not None and t.op.type.startswith("QueueDequeue")
               for t in tf.nest.flatten(result))


def user_input_fn(input_fn: Callable[..., Any]) -> Callable[..., Any]:
    """The user's input_fn inside the one a strategy is handed: Estimator hands
    ``lambda input_context: self._call_input_fn(input_fn, mode, input_context)``."""
    inner = callables.closure_value(input_fn, "input_fn")
    return input_fn if inner is None else user_input_fn(inner)


def _check_result(result: Any, input_fn: str = "the input_fn") -> None:
    """Raises unless ``result`` is what a strategy consumes; ``input_fn`` names the
    function that returned it (``callables.describe``)."""
    if isinstance(result, tf.data.Dataset) or callable(result):
        return
    if _queue_based(result):
        raise UsageError(
            "input_fn must return a tf.data.Dataset under a distribution strategy, and "
            "tf.estimator.inputs builds queue-based tensors: use input_fns.numpy_input_fn / "
            "input_fns.pandas_input_fn (same arguments) instead. Received: queue-based "
            f"{type(result).__name__} of tensors from {input_fn}")
    raise UsageError(
        "input_fn must return a tf.data.Dataset under a distribution strategy. Received: "
        f"{type(result).__name__} of tensors from {input_fn}; return the Dataset itself "
        "instead of make_one_shot_iterator(dataset).get_next()")


def _warn_whole_batches(result: Any, num_replicas: int,
                        input_fn: str = "the input_fn") -> None:
    batch = _static_batch_size(result) if isinstance(result, tf.data.Dataset) else None
    if ("global_batch", num_replicas, batch) in _warned:
        return
    _warned.add(("global_batch", num_replicas, batch))
    if batch is None:
        sizes = f"a whole batch, so the global batch is {num_replicas} times the input_fn's batch"
        fix = "global_batch_size"
    else:
        sizes = (f"a whole batch of {batch}, so the global batch is {batch * num_replicas} "
                 f"({batch} x {num_replicas})")
        fix = str(batch)
    warnings.warn(
        f"input_fn {input_fn} does not use input_context: each of the {num_replicas} "
        f"replicas receives {sizes}; accept `input_context` and batch by "
        f"`input_context.get_per_replica_batch_size({fix})` to keep a global batch of {fix}.",
        GlobalBatchWarning, stacklevel=2)


def checked_input_fn(input_fn: Callable[[tf.distribute.InputContext], Any],
                     num_replicas: int) -> Callable[[tf.distribute.InputContext], Any]:
    """Wraps the strategy-facing ``input_fn(input_context)`` with both checks."""

    def wrapped(input_context: tf.distribute.InputContext) -> Any:
        watched = _WatchedInputContext(input_context)
        _batch_size_reads.clear()
        result = input_fn(watched)
        name = callables.describe(user_input_fn(input_fn))
        _check_result(result, name)
        if not (watched.consulted or _batch_size_reads):
            _warn_whole_batches(result, num_replicas, name)
        return result

    return wrapped
