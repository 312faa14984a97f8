"""Sparse gradients reduced across workers as dense tensors (mend ``sparse_gradients``).

Gradients of embedding, linear and crossed feature columns are ``IndexedSlices`` whose
number of rows differs from worker to worker; the collective all-gather that reduces them
in an Estimator graph fails on that in TF 2.15 ("Shape mismatch in the collective
instance"). As dense tensors they are all-reduced like any other gradient, at the cost of
the variable's full size per step.
"""
import tensorflow as tf
from tensorflow.python.distribute import values as values_lib

from estimator_dist.mends import extended


def _densified(value):
    """``value`` (a per-replica value or a tensor) with ``IndexedSlices`` made dense."""
    if isinstance(value, values_lib.PerReplica):
        return values_lib.PerReplica(tuple(_densified(v) for v in value.values))
    if isinstance(value, tf.IndexedSlices):
        return tf.convert_to_tensor(value)
    return value


class _DenseReductionExtended:
    """The private reductions of a strategy's ``extended``, on densified values."""

    def _reduce_to(self, reduce_op, value, destinations, options):
        return super()._reduce_to(reduce_op, _densified(value), destinations, options)

    def _batch_reduce_to(self, reduce_op, value_destination_pairs, options):
        pairs = [(_densified(value), destination)
                 for value, destination in value_destination_pairs]
        return super()._batch_reduce_to(reduce_op, pairs, options)


def apply(strategy):
    """Makes ``strategy`` reduce sparse gradients as dense tensors (idempotent)."""
    extended.add_mixin(strategy, _DenseReductionExtended)
