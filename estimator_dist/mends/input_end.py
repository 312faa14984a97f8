"""Every worker of a "multi_worker" run ends its finite input after the same step.

Under ``MultiWorkerMirroredStrategy`` each worker reads its own input. When one worker's
input ends (uneven shards, or an epoch loop whose shards differ by a batch), its next
``get_next`` fails with ``OutOfRangeError`` before the step's all-reduce, while the other
workers wait in that all-reduce for it without end. Nor may the step that ends the
input run a collective: a step that fails while a peer still reads its collective's
buffers aborts it, and every later collective of the process fails ("Restart your
program to reset").

So a finite input is read one element ahead: each element carries two flags, "this
worker has data" and "another element follows" (counted when the cardinality is known,
else from a second pass over the input one element ahead), and after its end the input
goes on with padding (zeros of the element's shapes) flagged False. Each step
all-reduces both flags, one collective of two numbers that every worker runs at every
step. When a worker has no element after this one, ``EndTogetherHook`` stops training
after this step on every worker (``request_stop``), so no iterator reaches its end, no
step fails and every collective completes. Padding never reaches the model: only a
worker whose input is empty from the start makes the first step fail, on every worker,
with ``OutOfRangeError`` (a ``py_func`` raising ``StopIteration``).

An input whose cardinality is infinite (``repeat()`` without a count) cannot end and
pays nothing: it is left as it is. Under several steps per ``Session.run``
(``steps_per_run``) no hook runs between the steps: there the flags are dropped and the
input is read as TensorFlow reads it.
"""
from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf
from tensorflow.python.distribute import values as values_lib
from tensorflow.python.framework import func_graph

from estimator_dist.mends import extended as _extended

_INFINITE = tf.data.experimental.INFINITE_CARDINALITY
# Graph collection: per built iterator, whether some worker has no element after this step.
_WORKERS_WITH_NEXT = "estimator_dist_input_ends_after_this_step"


def _cardinality(dataset: tf.data.Dataset) -> int:
    """The dataset's cardinality (UNKNOWN when it cannot be computed here).

    In a graph the dataset's ops may be placed on a cluster task: the cardinality runs in
    a throwaway session on a device-free copy of the ops it needs.
    """
    cardinality = dataset.cardinality()
    if tf.executing_eagerly():
        return int(cardinality)
    graph_def = tf.compat.v1.graph_util.extract_sub_graph(
        cardinality.graph.as_graph_def(), [cardinality.op.name])
    for node in graph_def.node:
        node.device = ""
    with tf.Graph().as_default() as graph:
        tf.graph_util.import_graph_def(graph_def, name="")
        try:
            with tf.compat.v1.Session(graph=graph) as session:
                return int(session.run(cardinality.name))
        except tf.errors.OpError:  # E.g. a placeholder to feed.
            return tf.data.experimental.UNKNOWN_CARDINALITY


def _zeros(spec: tf.TensorSpec | tf.SparseTensorSpec) -> tf.Tensor | tf.SparseTensor:
    """A value of ``spec`` (a tensor or sparse tensor spec) of zeros; unknown dims are 0."""
    shape = [0 if d is None else d for d in spec.shape.as_list()]
    if isinstance(spec, tf.SparseTensorSpec):
        return tf.SparseTensor(tf.zeros([0, len(shape)], tf.int64), tf.zeros([0], spec.dtype),
                               shape)
    return tf.zeros(shape, spec.dtype)


def _next_flags(dataset: tf.data.Dataset, cardinality: int) -> tf.data.Dataset:
    """For each element of ``dataset``: whether another element follows it."""
    if cardinality >= 0:  # Known: counted, not read.
        return tf.data.Dataset.range(1, cardinality + 1).map(lambda i: i < cardinality)
    ahead = dataset.skip(1).map(lambda *element: True)  # The input, read one element ahead.
    return ahead.concatenate(tf.data.Dataset.from_tensors(False))


def flagged(dataset: Any) -> tf.data.Dataset | None:
    """``dataset``'s elements as ``(element, True, whether another follows)``, then
    ``(padding, False, False)`` forever; None when ``dataset`` is no Dataset, is infinite,
    or holds values other than tensors and sparse tensors."""
    if not isinstance(dataset, tf.data.Dataset):
        return None
    spec = dataset.element_spec
    if not all(isinstance(s, (tf.TensorSpec, tf.SparseTensorSpec))
               for s in tf.nest.flatten(spec)):
        return None
    cardinality = _cardinality(dataset)
    if cardinality == _INFINITE:
        return None
    always, never = (tf.data.Dataset.from_tensors(flag).repeat() for flag in (True, False))
    padding = tf.data.Dataset.from_tensors(tf.nest.map_structure(_zeros, spec)).repeat()
    data = tf.data.Dataset.zip((dataset, always, _next_flags(dataset, cardinality)))
    return data.concatenate(tf.data.Dataset.zip((padding, never, never)))


def _stop_unless_all(workers_with_data: float, workers: float) -> bool:
    if workers_with_data < workers:
        raise StopIteration  # py_func turns it into OutOfRangeError.
    return True


class EndTogetherIterator:
    """An iterator of ``flagged`` elements whose input ends on every worker after the
    same step.

    ``get_next`` all-reduces the two flags of this step's element. When every worker has
    another element after it, training goes on; otherwise ``EndTogetherHook`` stops
    training after this step on every worker, before any iterator reaches its end, so
    no step fails and every collective completes. Only a worker whose input is empty
    from the start still ends its first step with ``OutOfRangeError`` (on every worker).

    Args:
      strategy: the multi-worker strategy (its ``reduce`` all-reduces the flags).
      iterator: the strategy's iterator over ``flagged`` elements.
    """

    def __init__(self, strategy: tf.distribute.Strategy, iterator: Any) -> None:
        self._strategy = strategy
        self._iterator = iterator

    def initialize(self) -> Any:
        return self._iterator.initialize()

    def get_next(self) -> Any:
        element, has_data, has_next = self._iterator.get_next()
        if _in_loop():  # Several steps per Session.run: no hook can stop between them.
            return element
        local = self._strategy.experimental_local_results  # One replica per worker.
        flags = tf.cast(tf.stack([local(has_data)[0], local(has_next)[0]]), tf.float32)
        counts = self._strategy.reduce(tf.distribute.ReduceOp.SUM, flags, axis=None)
        workers = float(self._strategy.extended._num_workers)
        go_on = tf.compat.v1.py_func(_stop_unless_all, [counts[0], workers], tf.bool,
                                     stateful=True, name="input_empty_on_a_worker")
        tf.compat.v1.add_to_collection(_WORKERS_WITH_NEXT, counts[1] < workers)
        with tf.control_dependencies([go_on]):
            return tf.nest.map_structure(_after, element)


def _in_loop() -> bool:
    """Whether ops built now run in a loop body (v1 or v2 control flow)."""
    graph = tf.compat.v1.get_default_graph()
    return isinstance(graph, func_graph.FuncGraph) or graph._get_control_flow_context() is not None


def _after(value: Any) -> Any:
    """``value`` (a tensor, sparse tensor or per-replica value) behind the control
    dependencies in force."""
    if isinstance(value, values_lib.PerReplica):
        return values_lib.PerReplica(tuple(tf.identity(v) for v in value.values))
    return tf.identity(value)


class EndTogetherHook(tf.compat.v1.train.SessionRunHook):
    """Stops training after the step at which a worker's input has no next element."""

    def __init__(self) -> None:
        self._last = None

    def begin(self) -> None:
        found = tf.compat.v1.get_collection(_WORKERS_WITH_NEXT)
        self._last = found[-1] if found else None

    def before_run(self, run_context: tf.estimator.SessionRunContext
                   ) -> tf.estimator.SessionRunArgs | None:
        del run_context  # Unused.
        return tf.compat.v1.train.SessionRunArgs(self._last) if self._last is not None else None

    def after_run(self, run_context: tf.estimator.SessionRunContext,
                  run_values: tf.estimator.SessionRunValues) -> None:
        if self._last is not None and run_values.results:
            run_context.request_stop()


class FlaggedInputFn:
    """Wraps a strategy-facing ``input_fn(input_context)`` with ``flagged``; records
    whether it flagged what the input_fn returned."""

    def __init__(self, input_fn: Callable[[tf.distribute.InputContext], Any]) -> None:
        self._input_fn = input_fn
        self.flagged: bool | None = None

    def __call__(self, input_context: tf.distribute.InputContext) -> Any:
        result = self._input_fn(input_context)
        padded = flagged(result)
        self.flagged = padded is not None
        return result if padded is None else padded


class _EndTogetherExtended(_extended.Mixin):
    """Flags a finite input (``make_iterator``) where the strategy makes an input_fn's
    iterator, and adds an ``EndTogetherHook`` to the training spec Estimator builds per
    replica."""

    def _make_input_fn_iterator(self, input_fn: Callable[..., Any],
                                *args: Any, **kwargs: Any) -> Any:
        return make_iterator(self._container_strategy(), super()._make_input_fn_iterator,
                             input_fn, *args, **kwargs)

    def call_for_each_replica(self, fn: Callable[..., Any], args: tuple[Any, ...] = (),
                              kwargs: dict[str, Any] | None = None) -> Any:
        result = super().call_for_each_replica(fn, args, kwargs)
        if not tf.compat.v1.get_collection(_WORKERS_WITH_NEXT):
            return result
        return _extended.with_training_hook(result, EndTogetherHook())


def make_iterator(strategy: tf.distribute.Strategy, make_input_fn_iterator: Callable[..., Any],
                  input_fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``make_input_fn_iterator(input_fn, ...)`` (the strategy's own) whose finite input
    ends on every worker after the same step."""
    if len(strategy.extended.worker_devices) > 1:  # Several local replicas: left as it is.
        return make_input_fn_iterator(input_fn, *args, **kwargs)
    flagging = FlaggedInputFn(input_fn)
    iterator = make_input_fn_iterator(flagging, *args, **kwargs)
    return EndTogetherIterator(strategy, iterator) if flagging.flagged else iterator


def apply(strategy: tf.distribute.Strategy) -> None:
    """Makes ``strategy`` flag every finite input it makes an iterator of and add an
    ``EndTogetherHook`` to every Estimator training spec whose input it flagged."""
    _extended.add_mixin(strategy, _EndTogetherExtended)
