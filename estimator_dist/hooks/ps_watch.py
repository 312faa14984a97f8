"""Ends a parameter_server chief or worker whose ps task is gone, naming the ps.

The variables of a "parameter_server" job live on its ps tasks. When a ps process ends
(SIGKILL, a preempted pod, SIGTERM to the ps alone), the chief's and the workers' next
call to it fails; Estimator's monitored session treats that as a preemption and creates
the session again, and session creation waits for the ps without end and without a word
(TensorFlow logs "CreateSession still waiting for response from worker: /job:ps/..." at
INFO, which the CLI keeps quiet). On Kubernetes each task is its own pod, so no launcher
sees the ps go: the chief, workers and evaluator would wait for ever.

``watch(tf_config)`` (called by the "parameter_server" builder for the chief and the
workers) starts one daemon thread per process. While a thread of the process is inside
an Estimator's training (``internals.estimator_training``: session creation, steps,
hooks, the session's close), it asks every ps task's gRPC server once a second whether
it answers (``peer_failure.peer_state``, which opens an HTTP/2 connection: a gRPC server
answers from its network threads, whatever its ops are doing). A ps is gone when it
failed every probe for ``REFUSED_SECONDS`` (refused or no route: no process listens on
its port) or for ``SILENT_SECONDS`` (it accepts no connection or does not answer it: a
stopped or frozen process, or a host whose packets are dropped). Then the thread prints
one line naming the ps and what this task leaves saved, and ends the process with
``EXIT_CODE`` through ``process_exit.end`` (its training thread is blocked inside
TensorFlow, where no exception reaches it). Outside training (before it, after it,
between two ``train`` calls) the thread asks nothing and ends nothing.

A ps told to stop (SIGTERM, SIGINT: a cluster manager's, the user's) says so first
(``ps_stop``) and serves on while the chief or a worker answers: the thread reads that
word in the model dir each round, and stops training after the current step as the
signal would (``preemption.stop_training``), with one line; the chief saves the step,
and the task ends as on its own signal (the train command: exit code 128 + signal).

A ps that is merely slow is not declared gone: its gRPC server answers the probe while
its ops run, so only a process that answers no connection for ``SILENT_SECONDS`` in a
row is. The price: a ps restarted in place within those seconds does not get the
recovery TensorFlow would attempt (the chief restoring the last checkpoint into the new
ps); every task ends instead, and the job restarts from that checkpoint.

The evaluator is not watched: it reads the chief's checkpoints, not the ps.
"""
from __future__ import annotations

import signal
import sys
import threading
import time
from typing import Any, Mapping, Protocol, Sequence

import tensorflow as tf

from estimator_dist import process_exit, ps_stop
from estimator_dist.hooks import peer_failure, preemption
from estimator_dist.mends import internals


EXIT_CODE = 1
PROBE_EVERY_SECONDS = 1.0
PROBE_SECONDS = 2.0  # One probe's limit: connect, then the ps's HTTP/2 settings.
REFUSED_SECONDS = 4.0
SILENT_SECONDS = 10.0
_GONE_FOR_GOOD = "unreachable"


class _Watch:
    """The process's one watch: the ps tasks, this task's name, how long each failed."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None  # The daemon thread, started once.
        self.ps: tuple[tuple[str, str, str], ...] = ()  # (name, host, port) of each ps task.
        self.me: Any = None  # Set by watch(), before the thread starts.
        # ps name -> (monotonic time of its first failed probe, states)
        self.failing: dict[str, tuple[float, set[str]]] = {}
        # The model dir's ps_stop file as this training found it: (text,) once read.
        self.stop_before: tuple[str | None, ...] = ()
        self.stopped_on: str | None = None  # The ps_stop text that stopped training.
        self.started = 0.0  # When watch() was called (time.time()).


_WATCH = _Watch()


class TaskConfig(Protocol):
    """What ``watch`` reads of this task's ``TF_CONFIG`` (a ``cluster.TFConfig``)."""

    @property
    def cluster(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def task_type(self) -> str: ...

    @property
    def task_index(self) -> int: ...


def ps_tasks(spec: Mapping[str, Sequence[str]]) -> list[tuple[str, str, str]]:
    """[(name, host, port)] of the ps tasks of cluster ``spec``."""
    tasks = []
    for index, address in enumerate(spec.get("ps", ())):
        host, _, port = address.rpartition(":")
        tasks.append((f"ps {index}", host.strip("[]"), port))
    return tasks


def is_gone(first_failed: float, states: set[str], now: float) -> bool:
    """Whether a ps that failed every probe since ``first_failed`` (monotonic seconds),
    with ``states`` (``peer_failure.peer_state`` words) among them, is gone at ``now``."""
    failed_for = now - first_failed
    if states <= {_GONE_FOR_GOOD}:
        return failed_for >= REFUSED_SECONDS
    return failed_for >= SILENT_SECONDS


def newest_checkpoint_words(model_dir: str | None) -> str:
    """What a chief leaves saved, in words, read from ``model_dir`` now."""
    if model_dir is None:
        return "its checkpoints stay as they are"
    if "://" in model_dir:  # A bucket: no read that could block the exit.
        return f"the checkpoints in {model_dir} stay as they are"
    try:
        latest = tf.train.latest_checkpoint(model_dir)
    except Exception:  # Whatever the read raises.
        latest = None  # The line must still be printed, and the process ended.
    if latest is None:
        return f"{model_dir} holds no checkpoint yet"
    return (f"the newest checkpoint in {model_dir} is step {latest.rsplit('-', 1)[-1]}, "
            "as it was")


def gone_line(me: str, gone: Sequence[tuple[str, str, str, str]], seconds: float,
              saved: str) -> str:
    """The one line printed before the watch ends the process."""
    return (f"ps_watch: {me} stopped training: {peer_failure.describe(gone)}, for "
            f"{seconds:.0f} s, and the variables live there; {saved}; restart every task "
            "to resume from the last checkpoint.")


def _probe(ps: Sequence[tuple[str, str, str]],
           failing: dict[str, tuple[float, set[str]]]
           ) -> tuple[list[tuple[str, str, str, str]], float]:
    """Probes every ps of ``ps``, recording failures in ``failing``; returns [(name, host,
    port, state)] of those gone, and for how long the first of them has failed."""
    timeout = max(0.5, min(PROBE_SECONDS, 2 * PROBE_SECONDS / max(len(ps), 1)))
    gone, longest = [], 0.0
    for name, host, port in ps:
        state = peer_failure.peer_state(host, port, timeout=timeout)
        if state == "answers":
            failing.pop(name, None)
            continue
        first, states = failing.setdefault(name, (time.monotonic(), set()))
        states.add(state)
        if is_gone(first, states, time.monotonic()):
            gone.append((name, host, port, state))
            longest = max(longest, time.monotonic() - first)
    return gone, longest


def stopping_line(me: str, why: str) -> str:
    """The line printed when a ps's word to stop (``why``) stops this task's training."""
    saves = "and saves it" if me.startswith("chief") else "(the chief saves it)"
    return (f"ps_watch: {me} stops training after this step {saves}: {why} (the variables "
            "live there)")


def _stop_if_told(watch: _Watch, model_dir: str | None) -> None:
    """Stops training once the model dir's ``ps_stop`` file is new: written since this
    process began watching (by the clock), or changed since its training began."""
    now = ps_stop.state(model_dir)
    if not watch.stop_before:
        watch.stop_before = (now,)
    if now is None or now == watch.stopped_on:
        return
    if now != watch.stop_before[0] or ps_stop.written_at(now) >= watch.started:
        watch.stopped_on = now
        preemption.stop_training(signal.SIGTERM)
        print(stopping_line(watch.me, ps_stop.words(now)), file=sys.stderr, flush=True)


def check(watch: _Watch) -> str | None:
    """One round of ``watch``'s thread: the line to end the process with, or None. Outside
    training it asks no ps and forgets past failures and the ps_stop file's state."""
    with watch.lock:
        ps, me, failing = watch.ps, watch.me, watch.failing
    training = internals.estimator_training()
    if training is None:
        failing.clear()
        watch.stop_before = ()
        return None
    _stop_if_told(watch, training[1])
    gone, seconds = _probe(ps, failing)
    training = internals.estimator_training()
    if not gone or training is None:  # Training ended while the ps were asked.
        return None
    saved = (newest_checkpoint_words(training[1]) if me.startswith("chief")
             else "this task writes no checkpoints, the chief's stay as they are")
    return gone_line(me, gone, seconds, saved)


def _run(watch: _Watch) -> None:
    while True:
        time.sleep(PROBE_EVERY_SECONDS)
        line = check(watch)
        if line is not None:
            process_exit.end(EXIT_CODE, line)
            return  # The program's own handler (process_exit.set_handler) kept the process.


def watch(tf_config: TaskConfig) -> None:
    """Ends this process, with one line, when a ps task of ``tf_config`` (this task's
    ``cluster.TFConfig``, a chief or a worker) is gone while it trains; one daemon thread
    per process, started on the first call."""
    with _WATCH.lock:
        _WATCH.ps = tuple(ps_tasks(tf_config.cluster))
        _WATCH.me = f"{tf_config.task_type} {tf_config.task_index}"
        _WATCH.failing = {}
        _WATCH.started = time.time()
        if _WATCH.thread is None and _WATCH.ps:
            _WATCH.thread = threading.Thread(target=_run, args=(_WATCH,), name="ps-watch",
                                             daemon=True)
            _WATCH.thread.start()
