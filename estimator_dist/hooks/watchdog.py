"""Ends a multi-worker task whose training makes no progress, naming the peer to blame.

In TF 2.15 a collective launched with a timeout holds a thread for the whole timeout,
even when it finished long before (``SchedNonBlockingClosureAfter`` in
``base_collective_executor.cc``, read). At hundreds of collectives a second and a
timeout of minutes, a worker grows by about a thousand threads a second and aborts
within a minute. So "multi_worker" launches its collectives without a timeout, and this
watchdog bounds a stall instead: one daemon thread per process, which costs nothing per
step.

``StallWatchdogHook`` (added to every training spec the strategy builds) marks progress
each time a training step starts or ends. When the thread that trains stays inside that
training (a step, a hook's work such as a checkpoint save, session set-up and close) for
``timeout`` seconds without progress, the watchdog asks every peer's gRPC server whether
it answers (``peer_failure.silent_peers``), prints one line naming the peers that do not
(stopped, frozen or gone) and what to do, and ends the process with ``EXIT_CODE``
through ``process_exit.end`` (the training thread is stuck inside TensorFlow, where no
exception reaches it). A process out of that training (after an error, between train
calls, evaluating, or training another Estimator in another model dir) is never ended.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Mapping, Sequence

import tensorflow as tf

from estimator_dist import process_exit
from estimator_dist.hooks import peer_failure
from estimator_dist.mends import internals

EXIT_CODE = 1
_MAX_POLL_SECONDS = 5.0


class _Watch:
    """The process's one watch: which thread trains, when it last made progress."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None  # The daemon thread, started once.
        self.trainer: int | None = None  # Ident of the thread that runs the monitored session.
        self.beat = time.monotonic()
        # Set by the hook's begin, before the thread starts.
        self.timeout: Any = None
        self.cluster: Any = None
        self.me: Any = None
        self.model_dir: str | None = None  # Of the training the hook watches.


_WATCH = _Watch()


def stall_message(me: str, timeout: float, silent: Sequence[tuple[str, str, str, str]]) -> str:
    """The one line printed before the watchdog ends the process."""
    if silent:
        blame = f"{peer_failure.describe(silent)}; restart every task"
    else:
        blame = ("every peer answers, so a step or a hook of this task stalled (e.g. a "
                 "checkpoint save); restart every task")
    return (f"watchdog: {me} made no training progress for {timeout} s (collective_timeout): "
            f"{blame} from the last checkpoint, or raise collective_timeout "
            "(--collective-timeout) if steps or saves take that long.")


def _stalled(watch: _Watch) -> float:
    """The seconds since the last progress while training is stuck in a session, else 0."""
    with watch.lock:
        trainer, beat, timeout = watch.trainer, watch.beat, watch.timeout
        model_dir = watch.model_dir
    idle = time.monotonic() - beat
    if (trainer is None or idle < timeout
            or internals.training_model_dir(trainer) != model_dir):
        return 0  # Not stuck, or not in the training this hook watches (evaluating, ...).
    return idle


def _run(watch: _Watch) -> None:
    while True:
        time.sleep(min(_MAX_POLL_SECONDS, watch.timeout / 4))
        if not _stalled(watch):
            continue
        silent = peer_failure.silent_peers(watch.cluster, watch.me)
        if not _stalled(watch):  # Progress came while the peers were asked.
            continue
        process_exit.end(EXIT_CODE, stall_message(watch.me, watch.timeout, silent))
        return  # The program's own handler (process_exit.set_handler) kept the process.


def _beat() -> None:
    with _WATCH.lock:
        _WATCH.trainer = threading.get_ident()
        _WATCH.beat = time.monotonic()


class StallWatchdogHook(tf.compat.v1.train.SessionRunHook):
    """Ends the process when training makes no progress for ``timeout`` seconds.

    Args:
      timeout: seconds without progress before the process ends.
      cluster: the cluster, ``{task_type: [address, ...]}``.
      me: this task's name, e.g. "worker 1".
    """

    def __init__(self, timeout: float, cluster: Mapping[str, Sequence[str]], me: str) -> None:
        self._timeout = timeout
        self._cluster = cluster
        self._me = me

    def begin(self) -> None:
        with _WATCH.lock:
            _WATCH.model_dir = internals.training_model_dir(threading.get_ident())
            _WATCH.timeout = self._timeout
            _WATCH.cluster = self._cluster
            _WATCH.me = self._me
            if _WATCH.thread is None:
                _WATCH.thread = threading.Thread(target=_run, args=(_WATCH,),
                                                 name="stall-watchdog", daemon=True)
                _WATCH.thread.start()
        _beat()

    def after_create_session(self, session: tf.compat.v1.Session,
                             coord: tf.train.Coordinator) -> None:
        del session, coord  # Only the time matters.
        _beat()

    def before_run(self, run_context: tf.estimator.SessionRunContext) -> None:
        del run_context  # Only the time matters.
        _beat()

    def after_run(self, run_context: tf.estimator.SessionRunContext,
                  run_values: tf.estimator.SessionRunValues) -> None:
        del run_context, run_values  # Only the time matters.
        _beat()

    def end(self, session: tf.compat.v1.Session) -> None:
        del session  # Only the time matters.
        _beat()
