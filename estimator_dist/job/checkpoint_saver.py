"""The chief's checkpoint saver for runs that alternate ``train`` and ``evaluate`` calls.

Estimator adds a ``CheckpointSaverHook`` of its own to every ``train`` call that is given
none, and that hook writes the graph into the events file at every call. This one saves
checkpoints as Estimator's does and, with mend ``saver_graph_events``, leaves the graph
to the events file's writer, which writes it once per process.
"""
from __future__ import annotations

from typing import Sequence

import tensorflow as tf

from estimator_dist import mends

v1 = tf.compat.v1


class CheckpointSaverHook(tf.compat.v1.train.CheckpointSaverHook):
    """Estimator's ``CheckpointSaverHook`` for ``config``, without the graph in the events
    file.

    Hand it to ``estimator.train(hooks=[...])`` with the saving listeners given here:
    Estimator then adds no saver of its own.
    """

    def __init__(self, config: tf.estimator.RunConfig, *,
                 listeners: Sequence[tf.estimator.CheckpointSaverListener] = ()) -> None:
        super().__init__(config.model_dir, save_secs=config.save_checkpoints_secs,
                         save_steps=config.save_checkpoints_steps, listeners=list(listeners),
                         save_graph_def=config.checkpoint_save_graph_def)
        mends.apply("saver_graph_events", self)
