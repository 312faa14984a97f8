"""Preemption: on SIGTERM or SIGINT, finish the step, save a checkpoint of it, and stop.

Cluster managers stop a task with SIGTERM (Kubernetes, Slurm, preemptible VMs), users
with Ctrl-C (SIGINT). By default either ends an Estimator run at once, losing every step
since the last periodic checkpoint. ``PreemptionHook`` turns the signal into a flag; after
the current step it asks the session to stop. Stopping closes the session normally, so
the chief's ``CheckpointSaverHook`` saves the current step in its ``end``; the hook hands
``Preempted`` to the session's coordinator, which raises it as the session closes, after
every hook's ``end`` (the order of the hooks differs between Estimator's paths), naming
that checkpoint. The next run with the same model dir resumes from it.

Under a synchronous multi-worker strategy (``MultiWorkerMirroredStrategy``) every worker
must stop after the same step, or the ones still stepping wait in a collective for the
ones that stopped. So every ``sync_every_runs`` steps (counted alike on every worker) the
step also sums every worker's flag across the workers (a one-number all-reduce in the same
``Session.run``); all workers see the same sum and stop together, whichever of them got
the signal. Not every step: that all-reduce costs about as much as a small model's step
(``benchmarks/preemption_vote.py``). The chief's save needs no collective (it saves
its own copy of the mirrored variables).

A second signal while the hook waits for the step to end gives the signal its previous
handler back and delivers it again (e.g. Ctrl-C twice stops at once). Outside a training
session the previous handlers apply: the hook sets its own in ``begin`` and puts the
previous ones back in ``end``.

``stop_training(signum)`` stops every hook's session of the process as that signal would,
from any thread: a parameter server told to stop tells its trainers this way
(``ps_stop``, read by ``hooks.ps_watch``), since once it is gone they can save nothing.
"""
from __future__ import annotations

import re
import signal
import weakref
from typing import Any, Iterable, Sequence, cast

import tensorflow as tf
from estimator_dist import checkpoint_step
from estimator_dist.errors import check_positive_int
from estimator_dist.mends import internals

v1 = tf.compat.v1

SIGNALS = (signal.SIGTERM, signal.SIGINT)
_STEP_SUFFIX = re.compile(r"-\d+$")  # A saver of the run names its checkpoints PREFIX-STEP.
# The hooks whose session runs now, and a stop that came while none ran, for the next
# session to start (``stop_training``).
_RUNNING: weakref.WeakSet[PreemptionHook] = weakref.WeakSet()
_PENDING: list[int] = []


class Preempted(Exception):
    """Training stopped on a signal after saving (on the chief) the current step.

    Attributes:
      signum: the signal received (by this process, or by another worker of the cluster:
        then ``signal.SIGTERM``).
      step: the global step training stopped at.
      checkpoint: the path of the checkpoint saved at ``step`` (under parameter server
        training, at a later step when another worker stepped meanwhile); None on a worker
        that does not save checkpoints (only the chief does).
    """

    def __init__(self, signum: int, step: int,
                 savers: Iterable[tf.compat.v1.train.Saver] = ()) -> None:
        super().__init__(signum, step)
        self.signum, self.step = signum, step
        self._savers = tuple(savers)  # Their saves end before this is raised.

    @property
    def checkpoint(self) -> str | None:
        # A synchronous strategy saves ``step`` itself. Under parameter server training an
        # asynchronous worker may step the global step between the read of ``step`` and the
        # close's save: the checkpoint then holds a later step, and the stop step's work.
        saved = {path: checkpoint_step.step_of(path) for saver in self._savers
                 for path in saver.last_checkpoints[-1:] if _STEP_SUFFIX.search(path)}
        after_stop = [path for path, step in saved.items() if step >= self.step]
        return max(after_stop, key=saved.__getitem__, default=None)

    def __str__(self) -> str:
        where = (f"saved checkpoint {self.checkpoint}" if self.checkpoint else
                 "the chief saves the checkpoint")
        return (f"{signal.Signals(self.signum).name}: stopped training at step {self.step}; "
                f"{where}")


def _syncs_across_processes(strategy: tf.distribute.Strategy) -> bool:
    """Whether ``strategy`` steps in lockstep with other processes (multi-worker)."""
    return strategy.num_replicas_in_sync > len(strategy.extended.worker_devices)


def _checkpoint_savers() -> tuple[tf.compat.v1.train.Saver, ...]:
    """The graph's savers, if this process writes the run's checkpoints.

    Under a distribute coordinator (``train_and_evaluate`` on a cluster) the workers that
    do not checkpoint still save, into a scratch directory, so that any collective in the
    save runs everywhere; those saves are not the run's checkpoints.
    """
    context = internals.current_worker_context()
    if context is not None and not context.should_checkpoint:
        return ()
    return tuple(v1.get_collection(v1.GraphKeys.SAVERS))


class PreemptionHook(tf.compat.v1.train.SessionRunHook):
    """On SIGTERM or SIGINT: stop after the current step, save it, raise ``Preempted``.

    Pass it among the training hooks, e.g.
    ``estimator.train(input_fn, hooks=[estimator_dist.PreemptionHook()])`` or
    ``tf.estimator.TrainSpec(input_fn, hooks=[...])`` on every worker. The checkpoint is
    saved by the Estimator's own ``CheckpointSaverHook`` on the chief; ``Preempted`` is
    raised out of ``train`` (``train_and_evaluate``) on every worker, so evaluation and
    export do not start. Signals reach it only when training runs on the main thread
    (signal handlers can only be set there).

    Args:
      signals: the signals that preempt (default: SIGTERM and SIGINT).
      sync_every_runs: under a multi-worker strategy, the workers agree whether to stop
        once every this many ``Session.run`` calls (default: 10); elsewhere the hook
        stops after the step the signal arrives in.
    """

    def __init__(self, signals: Sequence[int] = SIGNALS, *, sync_every_runs: int = 10) -> None:
        check_positive_int("sync_every_runs", sync_every_runs)
        self._signals = tuple(signals)
        self._sync_every_runs = sync_every_runs
        self._runs = 0  # Session.run calls of this session.
        self._previous: dict[int, Any] = {}
        self._received: int | None = None  # The first signal of this session, if any.
        self._active = False  # A session runs: signals stop it.
        self._stopping = False  # Stop requested after the last step.
        self._flag: Any
        self._vote: Any
        self._coord: Any
        self._flag = self._vote = self._coord = None
        # The Preempted error of the last session, if it stopped.
        self._preempted: Preempted | None = None

    @property
    def preempted(self) -> Preempted | None:
        """The ``Preempted`` error the last session ended with (raised when it closes), or
        None: read it in a later hook's ``end`` or a saving listener's ``end``."""
        return self._preempted

    def _running(self) -> bool:
        # A session that ended on an error never calls end(), but its coordinator stops.
        return self._active and not self._coord.should_stop()

    def stop(self, signum: int) -> bool:
        """Stops the session after the current step, as ``signum`` would (a signal's
        handler runs this too); False when no session runs or one stops already."""
        if self._running() and self._received is None:
            self._received = signum
            return True
        return False

    def _handle(self, signum: int, frame: Any) -> None:
        del frame  # Unused.
        if self.stop(signum):
            return
        # A second signal, or one outside a session: the previous handler takes it.
        self._restore(signum)
        signal.raise_signal(signum)

    def _restore(self, signum: int) -> None:
        previous = self._previous.pop(signum, None)
        signal.signal(signum, signal.SIG_DFL if previous is None else previous)

    def begin(self) -> None:
        # The vote is built on every worker alike, or their collectives would not match.
        self._vote = None
        strategy = tf.distribute.get_strategy()
        if tf.distribute.has_strategy() and _syncs_across_processes(strategy):
            self._flag = v1.placeholder_with_default(0.0, [], name="preemption_flag")
            flags = strategy.run(lambda: tf.identity(self._flag))
            self._vote = strategy.reduce(tf.distribute.ReduceOp.SUM, flags, axis=None)
        try:
            for signum in self._signals:
                previous = signal.signal(signum, self._handle)
                if previous != self._handle:
                    self._previous[signum] = previous
        except ValueError:
            pass  # Not the main thread: no signal reaches this hook.

    def after_create_session(self, session: tf.compat.v1.Session,
                             coord: tf.train.Coordinator) -> None:
        del session  # Unused.
        self._coord = coord
        self._active, self._received, self._stopping = True, None, False
        self._preempted = None
        self._runs = 0
        _RUNNING.add(self)
        if _PENDING:  # Stopped while the session was being created: after its first step.
            self._received = _PENDING.pop()

    def _votes_now(self) -> bool:
        return self._vote is not None and self._runs % self._sync_every_runs == 0

    def before_run(self, run_context: tf.estimator.SessionRunContext
                   ) -> tf.estimator.SessionRunArgs | None:
        del run_context  # Unused.
        self._runs += 1
        if not self._votes_now():
            return None
        return v1.train.SessionRunArgs(
            self._vote, feed_dict={self._flag: 0.0 if self._received is None else 1.0})

    def after_run(self, run_context: tf.estimator.SessionRunContext,
                  run_values: tf.estimator.SessionRunValues) -> None:
        if self._vote is None:
            self._stopping = self._received is not None
        elif self._votes_now() and run_values.results > 0:
            # Every worker sees the same sum after the same step: all stop there.
            self._stopping = True
            self._received = self._received or signal.SIGTERM  # Another worker's signal.
        if self._stopping:
            run_context.request_stop()

    def end(self, session: tf.compat.v1.Session) -> None:
        self._active = False
        _RUNNING.discard(self)
        for signum in list(self._previous):
            self._restore(signum)
        if not self._stopping:
            return
        step = int(session.run(v1.train.get_global_step()))
        error = self._preempted = Preempted(cast(int, self._received), step, _checkpoint_savers())
        # The coordinator raises it when the session closes: after every hook's end, so
        # after the CheckpointSaverHook's final save whatever the order of the hooks.
        self._coord.request_stop((Preempted, error, None))


def stop_training(signum: int) -> None:
    """Stops every running session of the process that has a ``PreemptionHook`` after its
    current step, as ``signum`` would (the chief saving that step); with none running
    (a session being created), the next to start, after its first step. Safe from any
    thread."""
    if not any([hook.stop(signum) for hook in list(_RUNNING)]):
        _PENDING[:] = [signum]
