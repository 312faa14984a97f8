"""Float32 values all-reduced across workers as bfloat16 (mend ``bfloat16_all_reduce``,
applied when ``make_run_config(..., all_reduce_dtype="bfloat16")`` asks for it).

TF 2.15's ``CommunicationOptions`` has no wire dtype: ``MultiWorkerMirroredStrategy``
all-reduces float32 gradients in float32. Cast to bfloat16 they cross the network in half
the bytes, with about three significant digits kept; the result is float32 again.
"""
from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf
from tensorflow.python.distribute import values as values_lib

from estimator_dist.mends import extended


def _cast_floats(value: Any, from_dtype: tf.DType, to_dtype: tf.DType) -> Any:
    """``value`` (a per-replica or mirrored value, or a tensor) with its ``from_dtype``
    tensors cast to ``to_dtype``."""
    if isinstance(value, values_lib.DistributedValues):
        return type(value)(tuple(_cast_floats(v, from_dtype, to_dtype) for v in value.values))
    if isinstance(value, tf.Tensor) and value.dtype == from_dtype:
        return tf.cast(value, to_dtype)
    return value


class _Bfloat16ReductionExtended(extended.Mixin):
    """All-reduces float32 values across workers as bfloat16: half the bytes on the wire,
    about three significant digits kept; the result is float32 again."""

    def _batch_reduce_to(self, reduce_op: tf.distribute.ReduceOp,
                         value_destination_pairs: Sequence[tuple[Any, Any]],
                         options: Any) -> list[Any]:
        pairs = [(_cast_floats(value, tf.float32, tf.bfloat16), destination)
                 for value, destination in value_destination_pairs]
        casts = [_is_float32(value) for value, _ in value_destination_pairs]
        reduced = super()._batch_reduce_to(reduce_op, pairs, options)
        return [_cast_floats(r, tf.bfloat16, tf.float32) if cast else r
                for r, cast in zip(reduced, casts)]


def _is_float32(value: Any) -> bool:
    values = value.values if isinstance(value, values_lib.DistributedValues) else (value,)
    return any(isinstance(v, tf.Tensor) and v.dtype == tf.float32 for v in values)


def apply(strategy: tf.distribute.Strategy) -> None:
    """Makes ``strategy`` all-reduce its float32 values as bfloat16."""
    extended.add_mixin(strategy, _Bfloat16ReductionExtended)
