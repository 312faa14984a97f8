"""Stateful truncated BPTT: the LSTM state of K streams, carried from step to step.

Input contract (TRAIN and EVAL): long series are cut into ``num_streams`` (K) parallel
streams of consecutive windows. Besides ``x`` [batch, window, dim], the features hold
``stream`` int32 [batch] (each row's stream id in [0, K)) and ``reset`` bool [batch]
(True where a stream restarts: that row starts from zero state). A step's global batch
holds one window of each stream it advances, each stream at most once.

State contract: two non-trainable variables ``c`` and ``h`` of shape
[K, num_layers * num_units] hold each stream's state after its last window. A row
starts from its stream's saved state and, once the step ran, its final state is written
back. TRAIN keeps them in ``stream_state/`` (global variables, so checkpoints save them
and a resumed run continues from them); EVAL keeps its own in ``eval_stream_state/``
(local variables, zero at the start of every evaluation).

Within a step no replica needs another's state: every row's state belongs to one
example of one replica. Across steps, the next window of a stream may land on another
replica (or worker). So the variables are mirrored with SUM aggregation: each replica
writes the change of its own rows, the changes are summed over replicas (one
all-reduce of [K, state] per step), and every copy holds every stream's state.
"""
from __future__ import annotations

from typing import Callable

import tensorflow as tf

from model_fns import _features

v1 = tf.compat.v1
# ``save(final_c, final_h)``: the op that writes a batch's final state back.
SaveState = Callable[[tf.Tensor, tf.Tensor], tf.Operation]


def _variable(name: str, num_streams: int, state_size: int, training: bool) -> tf.Variable:
    collection = v1.GraphKeys.GLOBAL_VARIABLES if training else v1.GraphKeys.LOCAL_VARIABLES
    scope = "stream_state" if training else "eval_stream_state"
    return v1.get_variable(
        f"{scope}/{name}", shape=[num_streams, state_size], dtype=tf.float32,
        initializer=v1.zeros_initializer(), trainable=False, collections=[collection],
        use_resource=True, synchronization=tf.VariableSynchronization.ON_WRITE,
        aggregation=tf.VariableAggregation.SUM)


def carried_state(features: dict[str, tf.Tensor], *, training: bool, num_streams: int,
                  state_size: int, on_tpu: bool) -> tuple[tf.Tensor, tf.Tensor, SaveState]:
    """The initial state of this batch's rows and a function that saves their final state.

    Args:
      features: the features dict, with ``stream`` and ``reset``.
      training: True in TRAIN (checkpointed state), False in EVAL.
      num_streams: K.
      state_size: num_layers * num_units.
      on_tpu: sum the changes over TPU shards instead of through a strategy.

    Returns:
      (initial_c, initial_h, save): the initial state [batch, state_size] and
      ``save(final_c, final_h)``, which returns the op that writes the final state.
    """
    stream = _features.required(features, "stream", "[batch]", [None], tf.int32)
    reset = _features.required(features, "reset", "[batch]", stream.shape.as_list(), tf.bool)
    variables = [_variable(name, num_streams, state_size, training) for name in ("c", "h")]
    saved = [tf.gather(variable, stream) for variable in variables]
    initial = [tf.where(reset[:, None], tf.zeros_like(s), s) for s in saved]

    def save(final_c: tf.Tensor, final_h: tf.Tensor) -> tf.Operation:
        updates = []
        for variable, old, new in zip(variables, saved, (final_c, final_h)):
            change = tf.scatter_nd(stream[:, None], new - old, [num_streams, state_size])
            if on_tpu:
                change = v1.tpu.cross_replica_sum(change)
            updates.append(variable.assign_add(change))
        return tf.group(updates)

    return initial[0], initial[1], save
