"""The chief's checkpoint saver for runs that alternate ``train`` and ``evaluate`` calls.

Estimator adds a ``CheckpointSaverHook`` of its own to every ``train`` call that is given
none, and that hook writes the graph and the meta graph into the events file when its
session starts (read in ``tensorflow/python/training/basic_session_run_hooks.py``). A run
that trains and evaluates once per checkpoint interval calls ``train`` again and again,
so the same graph would go into the events file at every interval: for the lstm, most of
the file (docs/benchmarks.md, "The graph in the events file per train call").

The events file gets the graph once without it: the process's writer for a directory
(``FileWriterCache``) writes the default graph and its meta graph when it is created,
which happens inside the first ``train`` call. This hook saves checkpoints as
Estimator's does and leaves the graph out of the events file; ``graph.pbtxt`` and each
checkpoint's ``.meta`` file are written as before.
"""
import tensorflow as tf

v1 = tf.compat.v1


class _WithoutGraph:
    """A summary writer that passes on everything but the graph and the meta graph."""

    def __init__(self, writer):
        self._writer = writer

    def __getattr__(self, name):
        return getattr(self._writer, name)

    def add_graph(self, *args, **kwargs):
        del args, kwargs

    def add_meta_graph(self, *args, **kwargs):
        del args, kwargs


class CheckpointSaverHook(v1.train.CheckpointSaverHook):
    """Estimator's ``CheckpointSaverHook`` for ``config``, without the graph in the events
    file.

    Hand it to ``estimator.train(hooks=[...])`` with the saving listeners given here:
    Estimator then adds no saver of its own.
    """

    def __init__(self, config, *, listeners=()):
        super().__init__(config.model_dir, save_secs=config.save_checkpoints_secs,
                         save_steps=config.save_checkpoints_steps, listeners=list(listeners),
                         save_graph_def=config.checkpoint_save_graph_def)

    def begin(self):
        super().begin()
        self._summary_writer = _WithoutGraph(self._summary_writer)

    def end(self, session):
        super().end(session)
        # Nothing of this call is left in the process's cached writer, to be written into
        # the model dir later (by another run in the same process, say).
        self._summary_writer.flush()
