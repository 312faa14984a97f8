"""Checks on what a user's ``input_fn`` does under a distribution strategy.

Two mistakes in older Estimator code go wrong quietly or with a bare message under a
strategy:

* returning iterator tensors (``make_one_shot_iterator(ds).get_next()``): TensorFlow
  fails with "input_fn must return a tf.data.Dataset or a callable.";
* ignoring ``input_context``: every replica then receives a whole batch, so the global
  batch is the input_fn's batch times the number of replicas.
"""
import warnings

import tensorflow as tf

from estimator_dist.errors import UsageError

_warned = set()


class GlobalBatchWarning(UserWarning):
    """An input_fn ignores ``input_context``, so every replica gets a whole batch."""


class _WatchedInputContext(tf.distribute.InputContext):
    """An ``InputContext`` that records whether the input_fn consulted it."""

    def __init__(self, context):
        super().__init__(context.num_input_pipelines, context.input_pipeline_id,
                         context.num_replicas_in_sync)
        self.consulted = False

    def _seen(self, value):
        self.consulted = True
        return value

    @property
    def num_input_pipelines(self):
        return self._seen(self._num_input_pipelines)

    @property
    def input_pipeline_id(self):
        return self._seen(self._input_pipeline_id)

    @property
    def num_replicas_in_sync(self):
        return self._seen(self._num_replicas_in_sync)

    def get_per_replica_batch_size(self, global_batch_size):
        self.consulted = True
        return super().get_per_replica_batch_size(global_batch_size)


def _static_batch_size(dataset):
    for spec in tf.nest.flatten(dataset.element_spec):
        shape = getattr(spec, "shape", None)
        if shape is not None and shape.rank:
            return shape[0]
    return None


def _check_result(result):
    if isinstance(result, tf.data.Dataset) or callable(result):
        return
    raise UsageError(
        "input_fn must return a tf.data.Dataset under a distribution strategy. Received: "
        f"{type(result).__name__} of tensors; return the Dataset itself instead of "
        "make_one_shot_iterator(dataset).get_next()")


def _warn_whole_batches(result, num_replicas):
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
        f"input_fn does not use input_context: each of the {num_replicas} replicas receives "
        f"{sizes}; accept `input_context` and batch by "
        f"`input_context.get_per_replica_batch_size({fix})` to keep a global batch of {fix}.",
        GlobalBatchWarning, stacklevel=2)


def checked_input_fn(input_fn, num_replicas):
    """Wraps the strategy-facing ``input_fn(input_context)`` with both checks."""

    def wrapped(input_context):
        watched = _WatchedInputContext(input_context)
        result = input_fn(watched)
        _check_result(result)
        if not watched.consulted:
            _warn_whole_batches(result, num_replicas)
        return result

    return wrapped
