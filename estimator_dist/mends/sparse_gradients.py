"""Sparse gradients exchanged across workers as rows (mend ``sparse_gradients``).

Gradients of embedding, linear and crossed feature columns (and of ``tf.gather``) are
``IndexedSlices`` whose number of rows differs from worker to worker and from step to
step. TensorFlow's reduction of them under ``MultiWorkerMirroredStrategy`` all-gathers
the rows at their own length; in an Estimator graph a collective keeps the instance key
it was built with, and a collective instance keeps the shape it first ran with, so the
second step's rows fail "Shape mismatch in the collective instance" (checked with two
raw ``all_gather_v2`` in a graph: a fixed key fails on the second shape, a key per shape
runs).

Here each table whose dense gradient is worth it crosses as rows:

1. each worker sums its duplicate rows (``unique`` + ``unsorted_segment_sum``);
2. one all-reduce MAX agrees on the step's row count of every such table at once;
3. each worker pads its rows to the next size of a fixed ladder (ratio 2^(1/4), so at
   most 19 % padding) and all-gathers them, indices bit-cast into one more column of the
   values: one collective per table, each ladder size with its own instance key, so a
   shape never changes under a key;
4. padding rows (index -1) are dropped; the result is an ``IndexedSlices`` of every
   worker's rows, which the optimizer applies sparsely (summing rows that several workers
   touched, as it sums duplicates).

The rule (docs/mends.md): a table is all-reduced dense, packed with the dense gradients,
when its dense gradient is under ``DENSE_BELOW_BYTES`` (there a collective's latency costs
more than the bytes); otherwise it crosses as rows in every step whose agreed rows ×
row bytes (values + index) × workers stay within the dense tensor's bytes, and as a dense
all-reduce in a step above that (a ``cond`` on the agreed count, the same on every
worker). The choice for each table is printed once per process, in one line, when the
graph is built.
"""
from __future__ import annotations

import math
import sys
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf
from tensorflow.python.distribute import cross_device_ops as cross_device_ops_lib
from tensorflow.python.distribute import distribute_utils
from tensorflow.python.distribute import values as values_lib
from tensorflow.python.ops import collective_ops

from estimator_dist.mends import extended

# A table whose dense gradient is smaller is all-reduced dense, inside the one packed
# all-reduce of the dense gradients: about a collective's latency × bandwidth measured
# between two workers here (0.28 ms × 920 MB/s, docs/benchmarks.md "N hosts on paper").
DENSE_BELOW_BYTES = 256 * 1024
# Padded row counts: each step's agreed count is rounded up to the next of these.
LADDER_RATIO = 2 ** 0.25
# Values dtypes whose indices bit-cast into one more column, and the index dtype.
_INDEX_DTYPE = {tf.float32: tf.int32, tf.float64: tf.int64}
_REPORTED: set[str] = set()


def _densified(value: Any) -> Any:
    """``value`` (a per-replica value or a tensor) with ``IndexedSlices`` made dense."""
    if isinstance(value, values_lib.PerReplica):
        return values_lib.PerReplica(tuple(_densified(v) for v in value.values))
    if isinstance(value, tf.IndexedSlices):
        return tf.convert_to_tensor(value)
    return value


def _per_device(value: Any) -> tuple[Any, ...]:
    """The values of ``value`` on each device (a value on one device is not wrapped)."""
    if isinstance(value, values_lib.DistributedValues):
        return tuple(value.values)
    return (value,)


def _is_sparse(value: Any) -> bool:
    if isinstance(value, values_lib.PerReplica):
        return any(isinstance(v, tf.IndexedSlices) for v in value.values)
    return isinstance(value, tf.IndexedSlices)


def ladder(limit: int) -> list[int]:
    """The padded row counts up to ``limit`` (a geometric ladder ending at ``limit``)."""
    sizes, size = [], 1.0
    while size < limit:
        if math.ceil(size) not in sizes:
            sizes.append(math.ceil(size))
        size *= LADDER_RATIO
    return sizes + [int(limit)]


class _Plan:
    """How one sparse gradient crosses: its table's shape, and the most rows a step
    sends as rows (0: always dense)."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype: tf.DType, workers: int,
                 mode: str) -> None:
        self.name, self.shape, self.dtype = name, shape, dtype
        self.width = int(np.prod(shape[1:], dtype=np.int64))
        self.dense_bytes = int(shape[0]) * self.width * dtype.size
        self.row_bytes = (self.width + 1) * dtype.size
        if mode == "dense":
            self.max_rows, self.why = 0, f"dense ({_size(self.dense_bytes)}, asked)"
        elif mode == "rows":
            self.max_rows = int(shape[0])
            self.why = f"as rows (asked; {_size(self.dense_bytes)} dense)"
        elif self.dense_bytes < DENSE_BELOW_BYTES:
            self.max_rows = 0
            self.why = f"dense ({_size(self.dense_bytes)} < {_size(DENSE_BELOW_BYTES)})"
        else:
            self.max_rows = min(int(shape[0]), self.dense_bytes // (workers * self.row_bytes))
            self.why = (f"as rows up to {self.max_rows:,} a step, dense above "
                        f"({_size(self.dense_bytes)} dense, {self.row_bytes} B a row)")

    def describe(self) -> str:
        return f"{self.name} {list(self.shape)} {self.why}"


def _size(count: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def _plan(value: Any, destination: Any, workers: int, mode: str) -> _Plan | None:
    """The ``_Plan`` of a per-replica ``IndexedSlices`` value, or None where it cannot
    cross as rows (some replicas dense, an unknown table shape, a values dtype without a
    same-width index dtype)."""
    slices = _per_device(value)
    if not all(isinstance(s, tf.IndexedSlices) for s in slices):
        return None
    shape = tf.get_static_value(slices[0].dense_shape)
    if shape is None and hasattr(destination, "shape"):
        shape = destination.shape.as_list()
    if shape is None or any(d is None for d in shape) or len(shape) < 1:
        return None
    dtype = slices[0].values.dtype
    index_dtype = _INDEX_DTYPE.get(dtype)
    if index_dtype is None or shape[0] >= np.iinfo(index_dtype.as_numpy_dtype).max:
        return None
    name = getattr(destination, "name", None) or slices[0].values.name
    return _Plan(name.split(":")[0], tuple(int(d) for d in shape), dtype, workers, mode)


def _deduplicated(slices: tf.IndexedSlices, plan: _Plan) -> tuple[tf.Tensor, tf.Tensor]:
    """(indices, values [n, width]) of ``slices`` with duplicate rows summed."""
    index_dtype = _INDEX_DTYPE[plan.dtype]
    indices, positions = tf.unique(tf.cast(slices.indices, index_dtype), out_idx=tf.int32)
    values = tf.reshape(slices.values, [-1, plan.width])
    return indices, tf.math.unsorted_segment_sum(values, positions, tf.size(indices))


class _Collectives:
    """The collectives of one local device: the launcher's group, and fresh instance
    keys taken from the strategy's key table (the same sequence on every worker, as the
    graph is built in the same order)."""

    def __init__(self, launcher: Any, options: Any) -> None:
        self._launcher = launcher
        self.group_size = launcher._group_size
        self._options = launcher._options.merge(options)

    def key(self) -> int:
        launcher = self._launcher
        return launcher._collective_keys.get_instance_key(launcher._group_key,
                                                          launcher._device)

    def _common(self) -> dict[str, Any]:
        return {"group_size": self.group_size,
                "group_key": self._launcher._group_key,
                "communication_hint": self._options.implementation.value,
                "timeout": self._options.timeout_seconds}

    def all_reduce(self, tensor: tf.Tensor, instance_key: Any, merge_op: str = "Add") -> tf.Tensor:
        return collective_ops.all_reduce_v2(tensor, instance_key=instance_key,
                                            merge_op=merge_op, final_op="Id",
                                            **self._common())

    def all_gather(self, tensor: tf.Tensor, instance_key: Any) -> tf.Tensor:
        return collective_ops.all_gather_v2(tensor, instance_key=instance_key,
                                            **self._common())


def _rows_exchanged(indices: tf.Tensor, values: tf.Tensor, rows: tf.Tensor, plan: _Plan,
                    collectives: _Collectives, sizes: Sequence[int],
                    keys: Sequence[int]) -> tuple[tf.Tensor, tf.Tensor]:
    """(indices, values) of every worker's rows: padded to the ladder size at or above
    the agreed ``rows``, all-gathered under that size's key, padding dropped."""
    index_dtype = _INDEX_DTYPE[plan.dtype]
    step = tf.searchsorted(tf.constant(sizes, tf.int32), tf.reshape(rows, [1]))[0]
    padded = tf.gather(tf.constant(sizes, tf.int32), step)
    missing = padded - tf.size(indices)
    indices = tf.concat([indices, -tf.ones([missing], index_dtype)], 0)
    values = tf.concat([values, tf.zeros([missing, plan.width], plan.dtype)], 0)
    packed = tf.concat([values, tf.bitcast(indices, plan.dtype)[:, None]], 1)
    gathered = collectives.all_gather(packed, tf.gather(tf.constant(keys, tf.int32), step))
    gathered_indices = tf.bitcast(gathered[:, plan.width], index_dtype)
    kept = gathered_indices >= 0
    return (tf.boolean_mask(gathered_indices, kept),
            tf.boolean_mask(gathered[:, :plan.width], kept))


def _dense_exchanged(indices: tf.Tensor, values: tf.Tensor, plan: _Plan, collectives: _Collectives,
                     key: int) -> tuple[tf.Tensor, tf.Tensor]:
    """(indices, values) of the all-reduced dense table: every row."""
    rows = int(plan.shape[0])
    dense = tf.math.unsorted_segment_sum(values, tf.cast(indices, tf.int32), rows)
    return (tf.range(rows, dtype=indices.dtype), collectives.all_reduce(dense, key))


class _SparseRowsExtended(extended.Mixin):
    """The private reductions of a strategy's ``extended``: ``IndexedSlices`` cross as
    rows or dense by the module's rule; everything else as TensorFlow reduces it."""

    def call_for_each_replica(self, fn: Callable[..., Any], args: tuple[Any, ...] = (),
                              kwargs: dict[str, Any] | None = None) -> Any:
        # The model_fn's optimizers reduce their gradients inside this call: their
        # choices are printed together, in one line, when it returns.
        self._sparse_choices: Any = []  # None outside this call.
        try:
            return super().call_for_each_replica(fn, args, kwargs)
        finally:
            choices, self._sparse_choices = self._sparse_choices, None
            _report(getattr(self, "_sparse_workers", 0), choices)

    def _reduce_to(self, reduce_op: tf.distribute.ReduceOp, value: Any, destinations: Any,
                   options: Any) -> Any:
        if _is_sparse(value):
            return self._batch_reduce_to(reduce_op, [(value, destinations)], options)[0]
        return super()._reduce_to(reduce_op, value, destinations, options)

    def _batch_reduce_to(self, reduce_op: tf.distribute.ReduceOp,
                         value_destination_pairs: Sequence[tuple[Any, Any]],
                         options: Any) -> list[Any]:
        pairs = list(value_destination_pairs)
        cross_ops = self._get_cross_device_ops(pairs[0][0]) if pairs else None
        launchers = getattr(cross_ops, "_launchers", None)
        sparse = [i for i, (value, _) in enumerate(pairs) if _is_sparse(value)]
        if not sparse or not launchers or launchers[0]._group_size == 1:
            # One replica in all: nothing crosses, TensorFlow passes the rows through.
            return super()._batch_reduce_to(reduce_op, pairs, options)
        workers = launchers[0]._group_size
        mode = getattr(self, "_sparse_gradients_mode", "auto")
        plans: dict[int, Any]
        plans, considered = {}, []
        for i in sparse:
            value, destination = pairs[i]
            plan = _plan(value, destination, workers, mode)
            as_rows = (plan is not None and plan.max_rows > 0
                       and len(_per_device(value)) == len(launchers)
                       and cross_device_ops_lib._devices_match(value, destination))
            if as_rows:
                plans[i] = plan
            considered.append((plan, as_rows))
        self._sparse_workers = workers
        if getattr(self, "_sparse_choices", None) is None:
            _report(workers, considered)
        else:
            self._sparse_choices.extend(considered)
        dense_pairs = [(_densified(v) if i in sparse else v, d)
                       for i, (v, d) in enumerate(pairs) if i not in plans]
        reduced = iter(super()._batch_reduce_to(reduce_op, dense_pairs, options)
                       if dense_pairs else ())
        rows: Any = self._rows_reduced(reduce_op, [pairs[i][0] for i in plans],
                                  list(plans.values()), launchers,
                                  self._communication_options.merge(options))
        rows = dict(zip(plans, rows))
        return [rows[i] if i in rows else next(reduced) for i in range(len(pairs))]

    def _rows_reduced(self, reduce_op: tf.distribute.ReduceOp, values: list[Any],
                      plans: list[_Plan], launchers: Sequence[Any], options: Any) -> list[Any]:
        """The sums (or means) of ``values``, per-replica ``IndexedSlices``, as Mirrored
        ``IndexedSlices``, each crossing by its plan."""
        per_device = []
        for device_index, launcher in enumerate(launchers):
            collectives = _Collectives(launcher, options)
            count_key = collectives.key()
            ladders = [ladder(plan.max_rows) for plan in plans]
            keys = [([collectives.key() for _ in sizes], collectives.key())
                    for sizes in ladders]
            with tf.device(launcher._device):
                local = [_deduplicated(_per_device(value)[device_index], plan)
                         for value, plan in zip(values, plans)]
                counts = tf.stack([tf.size(indices) for indices, _ in local])
                agreed = collectives.all_reduce(counts, count_key, merge_op="Max")
                results = []
                for j, (plan, (indices, local_values)) in enumerate(zip(plans, local)):
                    sizes, (size_keys, dense_key) = ladders[j], keys[j]

                    def as_rows(i: tf.Tensor = indices, v: tf.Tensor = local_values,
                                p: _Plan = plan, s: list[int] = sizes, k: list[int] = size_keys,
                                r: tf.Tensor = agreed[j],
                                c: _Collectives = collectives) -> tuple[tf.Tensor, tf.Tensor]:
                        return _rows_exchanged(i, v, r, p, c, s, k)

                    def as_dense(i: tf.Tensor = indices, v: tf.Tensor = local_values,
                                 p: _Plan = plan, k: int = dense_key,
                                 c: _Collectives = collectives) -> tuple[tf.Tensor, tf.Tensor]:
                        return _dense_exchanged(i, v, p, c, k)

                    # The same count on every worker: every worker takes the same branch.
                    indices, summed = tf.cond(agreed[j] <= sizes[-1], as_rows, as_dense)
                    if reduce_op == tf.distribute.ReduceOp.MEAN:
                        summed = summed / collectives.group_size
                    original = _per_device(values[j])[device_index]
                    results.append(tf.IndexedSlices(
                        tf.reshape(summed, [-1, *plan.shape[1:]]),
                        tf.cast(indices, original.indices.dtype), original.dense_shape))
            per_device.append(results)
        return [distribute_utils.regroup(tuple(results[j] for results in per_device),
                                         wrap_class=values_lib.Mirrored)
                for j in range(len(plans))]


def _report(workers: int, plans: Sequence[tuple[_Plan | None, bool]]) -> None:
    """Prints, once per process for each distinct choice, one line naming each sparse
    gradient's table and how it crosses."""
    if not plans:
        return
    parts = []
    for plan, as_rows in plans:
        if plan is None:
            parts.append("a sparse gradient of unknown shape or dtype dense")
        elif as_rows or plan.max_rows == 0:
            parts.append(plan.describe())
        else:
            parts.append(f"{plan.name} {list(plan.shape)} dense (devices differ)")
    line = (f"sparse_gradients: {workers} replicas, rows while rows x row bytes x replicas "
            "< the dense bytes: " + "; ".join(parts))
    if line not in _REPORTED:
        _REPORTED.add(line)
        print(line, file=sys.stderr, flush=True)


MODES = ("auto", "rows", "dense")


def apply(strategy: tf.distribute.Strategy, mode: str = "auto") -> None:
    """Makes ``strategy`` exchange sparse gradients as rows by the module's rule ("auto"),
    always as rows ("rows") or always dense ("dense"); idempotent."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}. Received: mode={mode!r}")
    extended.add_mixin(strategy, _SparseRowsExtended)
    strategy.extended._sparse_gradients_mode = mode
