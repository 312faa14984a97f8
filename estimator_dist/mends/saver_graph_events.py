"""The graph into the events file once, not at every ``train`` call (mend
``saver_graph_events``).

Estimator's ``CheckpointSaverHook`` writes the graph and the meta graph into the events
file when its session starts (read in ``tensorflow/python/training/
basic_session_run_hooks.py``, ``CheckpointSaverHook.begin`` and
``after_create_session``). A run that trains and evaluates once per checkpoint interval
calls ``train`` again and again, so the hook writes the same graph into the events file
at every interval: one copy per interval (the lstm's graph is 1.15 MB), most of the file.

The events file gets the graph once without it: the process's writer for a directory
(``FileWriterCache``) writes the default graph and its meta graph when it is created,
which happens inside the first ``train`` call. ``apply(hook)`` makes a
``CheckpointSaverHook`` hand its summary writer everything but the graph and the meta
graph; ``graph.pbtxt`` and each checkpoint's ``.meta`` file are written as before.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from estimator_dist.mends import extended

if TYPE_CHECKING:
    import tensorflow as tf


class _WithoutGraph:
    """A summary writer that passes on everything but the graph and the meta graph."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)

    def add_graph(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs

    def add_meta_graph(self, *args: Any, **kwargs: Any) -> None:
        del args, kwargs


class _GraphOnceSaver(extended.Mixin):
    """A ``CheckpointSaverHook`` whose summary writer leaves the graph out."""

    def begin(self) -> None:
        super().begin()
        self._summary_writer: Any = _WithoutGraph(self._summary_writer)

    def end(self, session: tf.compat.v1.Session) -> None:
        super().end(session)
        # Nothing of this call is left in the process's cached writer, to be written into
        # the model dir later (by another run in the same process, say).
        self._summary_writer.flush()


def apply(hook: tf.compat.v1.train.CheckpointSaverHook) -> None:
    """Makes ``hook`` (a ``CheckpointSaverHook``) leave the graph out of the events file."""
    extended.mix_into(hook, _GraphOnceSaver)
