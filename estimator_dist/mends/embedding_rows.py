"""Embedding lookups that read the rows a batch looks up, not the whole table.

The defect (TensorFlow 2.15.1 and 2.21.0; read in ``tensorflow/python/ops/embedding_ops.py``
and Grappler's arithmetic optimizer): ``embedding_lookup_sparse``, which feature columns
call for an ``embedding_column`` and for the linear model's categorical and crossed
columns, builds ``Unique`` → gather of the unique rows → ``SparseSegmentSum``. Two things
turn that into a read of the whole table at every step:

* one process (a plain resource variable): Grappler's ``SimplifyEmbeddingLookupStage``
  rewrites the gather (``ResourceGather``) into a ``ReadVariableOp`` of the whole
  variable that the segment sum indexes. Once a sparse update (an optimizer's sparse
  apply) has touched the variable it is in copy-on-read mode, so that read copies the
  table: 12.8 MB a step for a 100,000 × 32 embedding;
* under ``mirrored`` and ``multi_worker`` (a distributed variable):
  ``embedding_lookup_sparse_impl`` converts the variable to a tensor, the same copy, in
  Python, before any gather.

TensorFlow's own way around the copy (``read_value_no_copy``) is never taken for a
resource variable: that branch requires params that are not a ``CompositeTensor``, and a
``ResourceVariable`` is one.

What ``install()`` changes, process-wide, in ``embedding_ops`` (whose functions call
each other through the module, so every caller, feature columns and
``tf.nn.embedding_lookup_sparse`` included, gets it):

* ``embedding_lookup`` given one resource variable passes the ids through a ``Snapshot``
  op: the rewrite only matches a gather whose ids come straight from the ``Unique``, so
  the lookup stays the ``ResourceGather`` of the rows the batch touches (which reads them
  under the variable's lock, copy-on-read or not);
* ``embedding_lookup_sparse_impl`` given one distributed variable looks up its
  replica's own copy (the variable a replica reads and its gradient reaches anyway)
  instead of converting the variable.

The sums are the same sums of the same rows; the gradients stay ``IndexedSlices`` of the
touched rows. Partitioned tables (several params), parameter-server variables (whose
gather already runs on the ps: the rewrite only joins a gather and a sum on one device)
and plain tensors are left as they are. ``make_run_config`` installs it (idempotent);
``uninstall()`` puts TensorFlow's functions back, for graphs built afterwards.
"""
from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.distribute import values as values_lib
from tensorflow.python.ops import embedding_ops, gen_array_ops, resource_variable_ops

_TF_LOOKUP = embedding_ops.embedding_lookup
_TF_SPARSE_IMPL = embedding_ops.embedding_lookup_sparse_impl


def _single(params: Any) -> Any:
    """The one table of ``params`` (a variable or a one-element list), else None."""
    if isinstance(params, (list, tuple)):
        return params[0] if len(params) == 1 else None
    return params


def _embedding_lookup(params: Any, ids: Any, *args: Any, **kwargs: Any) -> Any:
    """TensorFlow's ``embedding_lookup``, its ids snapshotted for a resource variable in a
    graph (ragged or sparse ids, and eager calls, go to TensorFlow as they are)."""
    if (isinstance(_single(params), resource_variable_ops.BaseResourceVariable)
            and isinstance(ids, tf.Tensor) and not tf.executing_eagerly()):
        ids = gen_array_ops.snapshot(ids)
    return _TF_LOOKUP(params, ids, *args, **kwargs)


def _embedding_lookup_sparse_impl(params: Any, *args: Any, **kwargs: Any) -> Any:
    """TensorFlow's ``embedding_lookup_sparse_impl``, a distributed variable's replica
    copy looked up in place of the converted variable."""
    table = _single(params)
    if isinstance(table, values_lib.DistributedVariable):
        params = [table._get_on_device_or_primary()]
    return _TF_SPARSE_IMPL(params, *args, **kwargs)


def install() -> None:
    """Lookups read only their rows, process-wide (idempotent)."""
    embedding_ops.embedding_lookup = _embedding_lookup
    embedding_ops.embedding_lookup_sparse_impl = _embedding_lookup_sparse_impl


def uninstall() -> None:
    """Puts TensorFlow's functions back, for graphs built afterwards."""
    embedding_ops.embedding_lookup = _TF_LOOKUP
    embedding_ops.embedding_lookup_sparse_impl = _TF_SPARSE_IMPL


def installed() -> bool:
    """Whether ``install()`` is in force."""
    return embedding_ops.embedding_lookup is _embedding_lookup
