"""Sparse gradients exchanged across workers as rows (mend ``sparse_gradients``).

Gradients of embedding, linear and crossed feature columns (and of ``tf.gather``) are
``IndexedSlices`` whose number of rows differs from worker to worker and from step to
step. TensorFlow's reduction of them under ``MultiWorkerMirroredStrategy`` all-gathers
the rows at their own length; in an Estimator graph a collective keeps the instance key
it was built with, and a collective instance keeps the shape it first ran with, so the
second step's rows fail "Shape mismatch in the collective instance" (checked with two
raw ``all_gather_v2`` in a graph: a fixed key fails on the second shape, a key per shape
runs).

Here the tables of one reduction (an optimizer's gradients) whose dense gradient is worth
it cross as rows, in one all-gather a step (per values dtype; two in a step whose rows
outgrow the guess below):

1. the rows a table sends: where its ids have a static size (a ``tf.gather`` of a fixed
   batch), that many, duplicates and all, every step; else its distinct rows (an
   embedding lookup's gradient has them already; another's duplicates are summed);
2. each worker packs into one vector its row count of each table without a static size,
   the reduction's small dense gradients (below), and each table's indices (bit-cast to
   the values' dtype) and values: all rows of a static size, else the table's guess of
   them, padded with index -1. The vector's size is static where every table's is (one
   instance key), else padded to the next size of a fixed ladder (ratio 2^(1/4), at most
   19 % padding), each size under its own instance key, so a shape never changes under a
   key;
3. one all-gather carries it; in a step where a worker counted more rows than the guess,
   a second all-gather (a ``cond`` on the gathered counts, the same on every worker)
   carries the rest. The guesses, a local variable of each worker set from the gathered
   counts (so the same on all), become the step's largest counts plus a quarter: 0 at
   first, so the first step takes the second all-gather;
4. the vectors are split back, padding rows dropped, dense gradients summed; each table's
   result is an ``IndexedSlices`` of every worker's rows, which the optimizer applies
   sparsely (summing rows that several workers touched, as it sums duplicates).

No collective agrees on a count beforehand: the counts travel with the rows. A static
size must be the same on every worker (the same batch size), as any collective's shape
must: where workers' batches differ, the all-gather fails "Shape mismatch". Every worker
must read the same guesses: they start at 0, so the workers of a run start together (as
``MultiWorkerMirroredStrategy`` requires), and each step reads them after the last step
set them, so steps run one after another: one a ``Session.run``, or the iterations of
``steps_per_run``'s loop, which TensorFlow runs one at a time (``parallel_iterations=1``).

The rule (docs/mends.md): a table is reduced dense with the dense gradients when its
dense gradient is under ``DENSE_BELOW_BYTES`` (there a collective's latency costs more
than the bytes); otherwise it crosses as rows in every step whose largest count × row
bytes (values + index) × workers stays within the dense tensor's bytes, and as a dense
all-reduce in a step above that (a ``cond`` on the gathered counts). Dense gradients of
the reduction ride in its all-gather while their bytes × workers stay under
``DENSE_BELOW_BYTES`` in all (an all-gather moves workers × the bytes, an all-reduce
about twice them); larger ones go to TensorFlow's all-reduce. The choice for each table
is printed once per process, in one line, when the graph is built.
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
from tensorflow.python.ops import collective_ops, resource_variable_ops

from estimator_dist.mends import extended

# A table whose dense gradient is smaller is all-reduced dense, inside the one packed
# all-reduce of the dense gradients: about a collective's latency × bandwidth measured
# between two workers here (0.28 ms × 920 MB/s, docs/benchmarks.md "N hosts on paper").
DENSE_BELOW_BYTES = 256 * 1024
# Padded sizes: a packed vector of a size that is not static is padded to the next.
LADDER_RATIO = 2 ** 0.25
# Values dtypes whose indices bit-cast into one more column, and the index dtype.
_INDEX_DTYPE = {tf.float32: tf.int32, tf.float64: tf.int64}
_REPORTED: set[str] = set()


def _densified(value: Any) -> Any:
    """``value`` (a per-replica value or a tensor) with ``IndexedSlices`` made dense, on
    the device of their values.

    The device is named: made under the merge call's device scope alone
    ("/job:worker/task:0"), a dense gradient's device string differs from its variable's
    ("/job:worker/replica:0/task:0/device:CPU:0"). TensorFlow compares a per-replica
    value's device strings as they are (``PerReplica._devices``), so the batch's devices
    "differ", and ``CollectiveAllReduce.batch_reduce_implementation`` all-reduces every
    gradient of the reduction on its own ("Efficient batch_reduce is not supported if
    destinations are different"): one collective round per variable, not one for all.
    """
    if isinstance(value, values_lib.PerReplica):
        return values_lib.PerReplica(tuple(_densified(v) for v in value.values))
    if isinstance(value, tf.IndexedSlices):
        with tf.device(value.values.device):
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
    """How one sparse gradient crosses: its table's shape, the most rows a step sends as
    rows (0: always dense), and ``static``, the rows every step sends where the ids'
    static size gives them within that most (else None: a count gathered each step)."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype: tf.DType, workers: int,
                 mode: str) -> None:
        self.name, self.shape, self.dtype = name, shape, dtype
        self.static: int | None = None
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
        static = f", {self.static:,} rows a step by the ids' static size" if self.static else ""
        return f"{self.name} {list(self.shape)} {self.why}{static}"


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
    plan = _Plan(name.split(":")[0], tuple(int(d) for d in shape), dtype, workers, mode)
    static = {s.indices.shape.num_elements() for s in slices}
    if len(static) == 1 and None not in static and 0 < min(static) <= plan.max_rows:
        plan.static = static.pop()
    return plan


# The gradient ops whose indices are the sorted unique values of their input 1, the ids
# the forward pass looked up (embedding_lookup_sparse of a tensor): their rows need no
# summing of duplicates.
_UNIQUE_ROWS_GRADS = ("SparseSegmentSumGradV2", "SparseSegmentMeanGradV2",
                      "SparseSegmentSqrtNGradV2")
# Ops that hand their input 0's values on unchanged, as a gather's gradient hands on its
# ids: a Unique's ids stay distinct through them.
_PASSED_ON = ("Identity", "Reshape", "Snapshot")
# A count guessed from the last step's largest: room for a quarter more rows.
_HEADROOM = 4


def _distinct(indices: tf.Tensor) -> bool:
    """Whether ``indices`` are distinct by how they were made: a ``Unique``'s ids (through
    reshapes and snapshots: the gradient of an embedding lookup's gather, embedding,
    linear and crossed feature columns) or a sparse segment reduction's gradient's."""
    while indices.op.type in _PASSED_ON:
        indices = indices.op.inputs[0]
    op = indices.op
    return ((op.type in ("Unique", "UniqueV2") and indices is op.outputs[0])
            or (op.type in _UNIQUE_ROWS_GRADS and indices is op.outputs[1]))


class _Rows:
    """One replica's rows of one table: ``indices`` [n] (the values' same-width index
    dtype) and ``values`` [n, width]; with ``plan.static`` rows, duplicates included
    (the optimizer sums them), else distinct rows."""

    def __init__(self, slices: tf.IndexedSlices, plan: _Plan) -> None:
        self.plan = plan
        self.indices = tf.cast(slices.indices, _INDEX_DTYPE[plan.dtype])
        self.values = tf.reshape(slices.values, [-1, plan.width])
        if plan.static or _distinct(slices.indices):
            return
        self.indices, positions = tf.unique(self.indices, out_idx=tf.int32)
        self.values = tf.math.unsorted_segment_sum(self.values, positions,
                                                   tf.size(self.indices))

    @property
    def falls_back(self) -> bool:
        """Whether a step may send this table dense (more rows than the rule's)."""
        return not self.plan.static and self.plan.max_rows < self.plan.shape[0]

    def sent(self, start: Any, size: Any) -> tuple[tf.Tensor, tf.Tensor]:
        """(indices, values) of rows [start, start + size), padded to ``size`` rows with
        index -1; all of them where the size is static."""
        if self.plan.static:
            return self.indices, self.values
        indices, values = self.indices[start:start + size], self.values[start:start + size]
        missing = size - tf.size(indices)
        return (tf.pad(indices, [[0, missing]], constant_values=-1),
                tf.pad(values, [[0, missing], [0, 0]]))


class _Collectives:
    """The collectives of one local device: the launcher's group, and fresh instance
    keys taken from the strategy's key table (the same sequence on every worker, as the
    graph is built in the same order)."""

    def __init__(self, launcher: Any, options: Any) -> None:
        self._launcher = launcher
        self.group_size = launcher._group_size
        self.device = launcher._device
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


def _all_gathered(parts: list[tf.Tensor], limit: int, collectives: _Collectives) -> tf.Tensor:
    """[replicas, size]: every replica's ``parts`` (1-D, one dtype) concatenated, from one
    all-gather (``_laddered``)."""
    vector, key = _laddered(parts, limit, collectives)
    return _gathered_rows(collectives.all_gather(vector, key), collectives)


def _laddered(parts: list[tf.Tensor], limit: int,
              collectives: _Collectives) -> tuple[tf.Tensor, Any]:
    """(vector, instance key) of ``parts`` (1-D, one dtype) concatenated: a static size
    under one instance key; else the vector padded to the next size of a ladder up to
    ``limit``, each size under its own key, so a shape never changes under a key."""
    vector = tf.concat(parts, 0)
    if vector.shape.num_elements() is not None:
        return vector, collectives.key()
    sizes = tf.constant(ladder(limit), tf.int32)
    keys = tf.constant([collectives.key() for _ in range(sizes.shape[0])], tf.int32)
    rung = tf.searchsorted(sizes, tf.reshape(tf.size(vector), [1]))[0]
    vector = tf.pad(vector, [[0, tf.gather(sizes, rung) - tf.size(vector)]])
    return vector, tf.gather(keys, rung)


def _gathered_rows(gathered: tf.Tensor, collectives: _Collectives) -> tf.Tensor:
    """``gathered`` (every replica's vector, one after another) as [replicas, size]."""
    return tf.reshape(gathered, [collectives.group_size, -1])


class _Columns:
    """Reads consecutive column ranges of a gathered [replicas, size] tensor."""

    def __init__(self, gathered: tf.Tensor) -> None:
        self._gathered, self._start = gathered, 0

    def take(self, size: Any) -> tf.Tensor:
        start, self._start = self._start, self._start + size
        return self._gathered[:, start:start + size]


def _packed(sent: list[tuple[tf.Tensor, tf.Tensor]], dtype: tf.DType) -> list[tf.Tensor]:
    """The 1-D parts of ``sent`` [(indices, values)]: every table's indices bit-cast to
    ``dtype``, then every table's values."""
    return ([tf.bitcast(indices, dtype) for indices, _ in sent]
            + [tf.reshape(values, [-1]) for _, values in sent])


def _unpacked(columns: _Columns, tables: Sequence[_Rows],
              slots: Sequence[Any]) -> list[tuple[tf.Tensor, tf.Tensor]]:
    """[(indices, values)] of every replica's ``slots`` rows of each of ``tables``, read
    from ``columns`` as ``_packed`` laid them out."""
    index_dtype = _INDEX_DTYPE[tables[0].plan.dtype]
    indices = [tf.bitcast(tf.reshape(columns.take(slot), [-1]), index_dtype) for slot in slots]
    return [(i, tf.reshape(columns.take(slot * table.plan.width), [-1, table.plan.width]))
            for i, table, slot in zip(indices, tables, slots)]


def _gathered(tables: list[_Rows], dense: list[tf.Tensor], collectives: _Collectives,
              ) -> tuple[list[tuple[tf.Tensor, tf.Tensor]], list[tf.Tensor], dict[int, tf.Tensor]]:
    """Every replica's (indices, values) of ``tables`` (one values dtype), padding
    dropped, the replicas' sums of the ``dense`` tensors (that dtype) and the largest
    row count of each table (by id; static ones left out).

    One all-gather carries each table's row count (a table of static size: none), the
    dense tensors and each table's rows: all of a static size, else as many as the
    table's guess, padded (``_with_the_rest`` sends the others)."""
    dtype = tables[0].plan.dtype
    index_dtype = _INDEX_DTYPE[dtype]
    counted = [table for table in tables if not table.plan.static]
    parts = [tf.reshape(tensor, [-1]) for tensor in dense]
    slots: list[Any] = [table.plan.static for table in tables]
    guesses = _Guesses(len(counted), collectives.device) if counted else None
    if guesses is not None:
        counts = tf.stack([tf.size(table.indices, out_type=index_dtype) for table in counted])
        parts.insert(0, tf.bitcast(counts, dtype))
        for j, table in enumerate(counted):
            slots[tables.index(table)] = guesses.read[j]
    parts += _packed([table.sent(0, slot) for table, slot in zip(tables, slots)], dtype)
    limit = len(counted) + sum(tensor.shape.num_elements() for tensor in dense) + sum(
        (table.plan.static or table.plan.max_rows) * (table.plan.width + 1) for table in tables)
    columns = _Columns(_all_gathered(parts, limit, collectives))
    largest: Any = (tf.reduce_max(tf.cast(tf.bitcast(columns.take(len(counted)), index_dtype),
                                          tf.int32), 0) if counted else None)
    sums = [tf.reshape(tf.reduce_sum(columns.take(tensor.shape.num_elements()), 0),
                       tensor.shape) for tensor in dense]
    results = dict(zip(map(id, tables), _unpacked(columns, tables, slots)))
    if guesses is not None:
        results.update(_with_the_rest(results, counted, guesses, largest, collectives))
    return ([results[id(table)] for table in tables], sums,
            {id(table): largest[j] for j, table in enumerate(counted)})


class _Guesses:
    """A local int32 variable of each ``counted`` table's rows the next step's first
    all-gather carries, 0 at first, and ``read``, its value in this step. A local
    variable of each worker, outside the strategy (not mirrored, not saved); every worker
    sets it from the same gathered counts, so it is the same on all of them."""

    def __init__(self, count: int, device: str) -> None:
        with tf.init_scope(), tf.device(device):
            self.variable = resource_variable_ops.ResourceVariable(
                tf.zeros([count], tf.int32), trainable=False, name="sparse_rows_guesses",
                collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES])
        self.read = self.variable.read_value()

    def update(self, largest: tf.Tensor, maxima: tf.Tensor) -> tf.Operation:
        """The next step's guesses: the largest counts plus a quarter, at most the rule's
        rows; 0 for a table that crossed dense (above the rule)."""
        grown = tf.minimum(largest + largest // _HEADROOM, maxima)
        return self.variable.assign(tf.where(largest <= maxima, grown, 0), read_value=False)


def _with_the_rest(first: dict[int, tuple[tf.Tensor, tf.Tensor]], counted: list[_Rows],
                   guesses: _Guesses, largest: tf.Tensor,
                   collectives: _Collectives) -> dict[int, tuple[tf.Tensor, tf.Tensor]]:
    """{table id: (indices, values)} of the ``counted`` tables: their ``first`` rows (by
    table id) and, in a step where a replica counted more than the guess, the rest from
    a second all-gather (a ``cond`` on the gathered counts, the same on every worker),
    padding dropped. Sets the guesses for the next step."""
    dtype = counted[0].plan.dtype
    maxima = tf.constant([table.plan.max_rows for table in counted], tf.int32)
    # Rows beyond the guesses, none for a table crossing dense in this step.
    extra = tf.where(largest <= maxima, tf.maximum(largest - guesses.read, 0), 0)
    extras = [extra[j] for j in range(len(counted))]

    # The rest's vector is made outside the cond, which holds the all-gather alone: in
    # TensorFlow 1 behaviour (a Switch/Merge cond) Grappler rewrote sums of a branch's
    # inputs so that the branch's output was dead in the very steps that took it (TF
    # 2.15), and every op after it, the training step's own, silently did not run.
    sent = [table.sent(guesses.read[j], extras[j]) for j, table in enumerate(counted)]
    vector, key = _laddered(_packed(sent, dtype), sum(
        table.plan.max_rows * (table.plan.width + 1) for table in counted), collectives)
    gathered = tf.cond(tf.reduce_any(extra > 0),
                       lambda: collectives.all_gather(vector, key),
                       lambda: tf.zeros([0], dtype))
    more = _unpacked(_Columns(_gathered_rows(gathered, collectives)), counted, extras)
    update = guesses.update(largest, maxima)
    results = {}
    for j, table in enumerate(counted):
        indices, values = first[id(table)]
        with tf.control_dependencies([update]):
            indices = tf.concat([indices, more[j][0]], 0)
        kept = indices >= 0
        results[id(table)] = (tf.boolean_mask(indices, kept),
                              tf.boolean_mask(tf.concat([values, more[j][1]], 0), kept))
    return results


def _dense_exchanged(positions: tf.Tensor, values: tf.Tensor, plan: _Plan,
                     collectives: _Collectives, key: int) -> tuple[tf.Tensor, tf.Tensor]:
    """(indices, values) of the all-reduced dense table: every row. ``positions``: the
    rows' indices as int32."""
    rows = int(plan.shape[0])
    dense = tf.math.unsorted_segment_sum(values, positions, rows)
    return (tf.range(rows, dtype=_INDEX_DTYPE[plan.dtype]), collectives.all_reduce(dense, key))


def _exchanged(tables: list[_Rows], dense: list[tf.Tensor], collectives: _Collectives,
               ) -> tuple[list[Any], list[tf.Tensor]]:
    """Every replica's (indices, values) of each of ``tables``, and the replicas' sums of
    the ``dense`` tensors (each of a table's dtype): one all-gather for the tables and
    dense tensors of each values dtype (two in a step where rows outgrow their guess); a
    table whose largest count is above its rule's crosses dense in that step (a ``cond``,
    the same on every worker)."""
    results: dict[int, Any] = {}
    sums: dict[int, tf.Tensor] = {}
    largest: dict[int, tf.Tensor] = {}
    for dtype in dict.fromkeys(table.plan.dtype for table in tables):
        group = [table for table in tables if table.plan.dtype == dtype]
        riders = [i for i, tensor in enumerate(dense) if tensor.dtype == dtype]
        exchanged, summed, counts = _gathered(group, [dense[i] for i in riders], collectives)
        results.update((id(table), result) for table, result in zip(group, exchanged))
        sums.update(zip(riders, summed))
        largest.update(counts)
    for table in tables:
        if table.falls_back:
            as_rows = results[id(table)]

            # Made outside the cond (see _with_the_rest): the branch gets its inputs as they
            # are used.
            positions = tf.cast(table.indices, tf.int32)

            def as_dense(t: _Rows = table, p: tf.Tensor = positions,
                         k: int = collectives.key()) -> tuple[tf.Tensor, tf.Tensor]:
                return _dense_exchanged(p, t.values, t.plan, collectives, k)

            results[id(table)] = tf.cond(largest[id(table)] <= table.plan.max_rows,
                                         lambda r=as_rows: tuple(r), as_dense)
    return [results[id(table)] for table in tables], [sums[i] for i in range(len(dense))]


def _riders(dense: dict[int, Any], destinations: dict[int, Any], dtypes: set[tf.DType],
            launchers: Sequence[Any]) -> list[int]:
    """The keys of the ``dense`` per-replica values (key -> value) that ride in the rows'
    all-gather: of a rows table's dtype (``dtypes``), static shapes, on the launchers'
    devices, while their bytes x replicas stay under ``DENSE_BELOW_BYTES`` in all. An
    all-gather moves replicas x the bytes where an all-reduce moves about twice them:
    below that size a collective's latency costs more than the bytes."""
    riders: list[int] = []
    budget = DENSE_BELOW_BYTES // launchers[0]._group_size
    for key, value in dense.items():
        parts = _per_device(value)
        if not (len(parts) == len(launchers) and all(isinstance(p, tf.Tensor) for p in parts)
                and all(p.dtype in dtypes and p.shape.is_fully_defined() for p in parts)
                and cross_device_ops_lib._devices_match(value, destinations[key])):
            continue
        size = parts[0].shape.num_elements() * parts[0].dtype.size
        if size < budget:
            riders.append(key)
            budget -= size
    return riders


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
        plans: dict[int, _Plan] = {}
        considered: list[tuple[_Plan | None, bool]] = []
        for i in sparse:
            value, destination = pairs[i]
            plan = _plan(value, destination, workers, mode)
            as_rows = (plan is not None and plan.max_rows > 0
                       and len(_per_device(value)) == len(launchers)
                       and cross_device_ops_lib._devices_match(value, destination))
            if plan is not None and as_rows:
                plans[i] = plan
            considered.append((plan, as_rows))
        self._sparse_workers = workers
        if getattr(self, "_sparse_choices", None) is None:
            _report(workers, considered)
        else:
            self._sparse_choices.extend(considered)
        dense = {i: _densified(v) if i in sparse else v
                 for i, (v, _) in enumerate(pairs) if i not in plans}
        riders = (_riders(dense, {i: d for i, (_, d) in enumerate(pairs)},
                          {plan.dtype for plan in plans.values()}, launchers)
                  if plans else [])
        rest = [(dense[i], pairs[i][1]) for i in dense if i not in riders]
        reduced = iter(super()._batch_reduce_to(reduce_op, rest, options) if rest else ())
        crossed = dict(zip([*plans, *riders], self._rows_reduced(
            reduce_op, [pairs[i][0] for i in plans], list(plans.values()),
            [dense[i] for i in riders], launchers, self._communication_options.merge(options))))
        return [crossed[i] if i in crossed else next(reduced) for i in range(len(pairs))]

    def _rows_reduced(self, reduce_op: tf.distribute.ReduceOp, values: list[Any],
                      plans: list[_Plan], dense: list[Any], launchers: Sequence[Any],
                      options: Any) -> list[Any]:
        """The sums (or means) of ``values``, per-replica ``IndexedSlices``, as Mirrored
        ``IndexedSlices``, each crossing by its plan, then those of ``dense``, per-replica
        tensors riding in the same all-gather, as Mirrored tensors."""
        per_device = []
        for device_index, launcher in enumerate(launchers):
            collectives = _Collectives(launcher, options)
            with tf.device(launcher._device):
                originals = [_per_device(value)[device_index] for value in values]
                tables = [_Rows(original, plan) for original, plan in zip(originals, plans)]
                rows, sums = _exchanged(
                    tables, [_per_device(value)[device_index] for value in dense], collectives)
                results = []
                for original, plan, (indices, summed) in zip(originals, plans, rows):
                    results.append(tf.IndexedSlices(
                        tf.reshape(_reduced(summed, reduce_op, collectives),
                                   [-1, *plan.shape[1:]]),
                        tf.cast(indices, original.indices.dtype), original.dense_shape))
                results.extend(_reduced(summed, reduce_op, collectives) for summed in sums)
            per_device.append(results)
        return [distribute_utils.regroup(tuple(results[j] for results in per_device),
                                         wrap_class=values_lib.Mirrored)
                for j in range(len(plans) + len(dense))]


def _reduced(summed: tf.Tensor, reduce_op: tf.distribute.ReduceOp,
             collectives: _Collectives) -> tf.Tensor:
    """``summed`` over the replicas as ``reduce_op`` asks (a MEAN divided by them)."""
    if reduce_op == tf.distribute.ReduceOp.MEAN:
        return summed / collectives.group_size
    return summed


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
