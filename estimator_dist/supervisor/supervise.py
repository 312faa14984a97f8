"""A launch from start to exit code: the cluster started, watched until a task ends the
run (``task_ends``), restarted after a failure while ``--max-restarts`` allows
(``restarts``), stopped, and its end told in one line.

A run that failed ends with one more line once the other tasks are stopped and their
output is out: the first failing task's own last line on stderr (``cause_line``), so that
the last line a user reads is the root cause, not a peer's stop. When every chief and
worker has exited 0 the evaluator is told (``training_ended``).

The launcher's SIGTERM and SIGINT go to the tasks running now (``Forwarder``); it exits
128 + the signal, whatever the tasks exit with, after giving them time to save a
checkpoint. ``--timeout`` ends a run, or the wait before a restart, with exit code 124.
"""
from __future__ import annotations

import signal
import sys
import time
from typing import Any, Callable, cast

from estimator_dist import checkpoint_step, ps_stop
from estimator_dist.supervisor import isolation, reaper, restarts, tasks as tasks_lib
from estimator_dist.supervisor.spec import LaunchSpec
from estimator_dist.supervisor.task_ends import End, end_of
from estimator_dist.supervisor.training_ended import TrainingEnded

_POLL_SECONDS = 0.2
# After a forwarded SIGTERM/SIGINT tasks save a checkpoint before they exit: give them time,
# and no second signal (which would stop them at once).
_SIGNALLED_GRACE_SECONDS = 30
# Once a parameter server has ended, the chief and workers cannot save (the variables lived
# there) and wait for it inside TensorFlow: waiting longer for them gains nothing.
_PS_GONE_GRACE_SECONDS = 3
# How long the launcher waits for a task's last output after the task has ended (what it
# started may hold its streams open).
_OUTPUT_SECONDS = 5



class Forwarder:
    """The launcher's SIGTERM/SIGINT handler: records the signal and forwards it to the
    tasks running now (to a group started while it arrived, once the group is up)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.tasks: list[tasks_lib.Task] = []  # The group started last.
        self._forwarded = False

    def __call__(self, signum: int, frame: Any) -> None:
        del frame  # Unused.
        self.received.append(signum)
        self._forward(signum)

    def _forward(self, signum: int) -> None:
        self._forwarded = True
        for task in self.tasks:
            task.signal(signum)

    def watch(self, tasks: list[tasks_lib.Task]) -> None:
        """Forwards signals to ``tasks`` from now on, and one that came while they started."""
        self.tasks, self._forwarded = tasks, False
        if self.received and not self._forwarded:
            self._forward(self.received[0])


def _watch(tasks: list[tasks_lib.Task], deadline: float | None, forwarder: Forwarder,
           ended: TrainingEnded, model_dir: str | None) -> End:
    """Waits for the run to end: the launcher got a signal, a task ends the job
    (``end_of``), every task but the ps tasks exited 0, or the deadline passed. Once every
    chief and worker has exited 0, ``ended`` says so (to the evaluator)."""
    trainers = [t for t in tasks if t.task_type in ("chief", "worker")]
    finishing = [t for t in tasks if t.task_type != "ps"]
    since = time.time()
    while True:
        if forwarder.received:
            return End("signalled", signum=forwarder.received[0])
        for task in tasks:
            end = end_of(task, trainers)
            if end:
                return _stopped_by_ps(end, tasks, model_dir, since)
        if all(t.process.poll() == 0 for t in finishing):
            return End("done")
        if trainers and all(t.process.poll() == 0 for t in trainers):
            ended.mark()
        if deadline and time.monotonic() > deadline:
            return End("timeout", why="running")
        time.sleep(_POLL_SECONDS)


def _stopped_by_ps(end: End, tasks: list[tasks_lib.Task], model_dir: str | None,
                   since: float) -> End:
    """``end``, or where a chief or worker stopped after a ps told them it stops
    (``ps_stop``: the signal went to the ps, which serves until they have ended), the ps's
    stop."""
    if end.outcome != "stopped" or end.task is None or end.task.task_type == "ps":
        return end
    told = ps_stop.told(model_dir, since)
    server = next((t for t in tasks if told and t.name == told[0]), None)
    if told is None or server is None:
        return end
    return End("stopped", server, f"got {told[1]}; its chief and workers stopped after their "
                                  "step, the chief saving it", signal.Signals[told[1]])


def _wait_to_restart(seconds: float, deadline: float | None, forwarder: Forwarder) -> End | None:
    """Sleeps ``seconds`` unless the launcher gets a signal or the deadline passes first;
    returns the ``End`` of that, else None."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if forwarder.received:
            return End("signalled", signum=forwarder.received[0])
        if deadline and time.monotonic() > deadline:
            return End("timeout", why="waiting")
        time.sleep(min(_POLL_SECONDS, max(0.0, until - time.monotonic())))
    return None


def _supervise(start: Callable[[], list[tasks_lib.Task]], spec: LaunchSpec,
               forwarder: Forwarder, watcher: reaper.Reaper,
               ended: TrainingEnded) -> tuple[End, int]:
    """Runs the cluster ``start()`` starts, again after a failure while ``--max-restarts``
    allows and the command does not fail at start; returns the last run's ``End`` and
    the restarts made. ``forwarder.tasks`` is the group started last, for the caller to
    stop."""
    deadline = time.monotonic() + spec.timeout if spec.timeout else None
    model_dir = restarts.model_dir_of(spec.command)
    backoff = restarts.Backoff()
    restart = at_start = 0
    while True:
        started, step = time.monotonic(), checkpoint_step.newest_step(model_dir)
        ended.reset()
        forwarder.watch(start())
        end = _watch(forwarder.tasks, deadline, forwarder, ended, model_dir)
        if end.outcome != "failed":
            return end, restart
        ran = time.monotonic() - started
        failed_at_start = restarts.failed_at_start(
            ran, step, checkpoint_step.newest_step(model_dir))
        at_start = at_start + 1 if failed_at_start else 0
        if restart == spec.max_restarts or at_start == restarts.START_FAILURES:
            return end, restart
        tasks_lib.stop(forwarder.tasks, watcher, grace=_grace(end))
        if forwarder.received:  # Stopped while the failed group stopped: no restart.
            return End("signalled", signum=forwarder.received[0]), restart
        restart += 1
        wait = backoff.next_wait(ran)
        task = cast(tasks_lib.Task, end.task)  # A failed run names its task.
        print(restarts.restart_line(task.name, end.why, restart, spec.max_restarts, wait,
                                    model_dir), file=sys.stderr, flush=True)
        waited = _wait_to_restart(wait, deadline, forwarder)
        if waited:
            return waited, restart


def _grace(end: End) -> float:
    """How long the tasks left after ``end`` get to stop after SIGTERM."""
    if end.outcome == "signalled":
        return _SIGNALLED_GRACE_SECONDS
    if end.task is not None and end.task.task_type == "ps":
        return _PS_GONE_GRACE_SECONDS
    return _SIGNALLED_GRACE_SECONDS if end.outcome == "stopped" else tasks_lib.STOP_GRACE_SECONDS


def _report(end: End, restart: int, spec: LaunchSpec) -> int:
    """Prints the line of an ``End`` other than done; returns the exit code."""
    # Each is set on the ends that read it below.
    task, signum = cast(tasks_lib.Task, end.task), cast(int, end.signum)
    if end.outcome == "signalled":
        return 128 + signum
    if end.outcome == "timeout":
        print(f"launch: tasks still running after --timeout {spec.timeout} s; stopping them"
              if end.why == "running" else
              f"launch: --timeout {spec.timeout} s ran out while waiting to restart",
              file=sys.stderr)
        return 124
    if end.outcome == "stopped":
        print(f"launch: {task.name} {end.why}; stopping the other tasks", file=sys.stderr)
        return 128 + signum
    if end.outcome == "failed":
        code = task.process.returncode
        after = f" after {restart} restart{'s' if restart > 1 else ''}" if restart else ""
        if restart < spec.max_restarts:  # Restarts left: the command failed at start.
            after = (f" at start in {restarts.START_FAILURES} runs in a row (each within "
                     f"{restarts.START_SECONDS} s, no new checkpoint): a command that fails "
                     "at start is not restarted")
        print(f"launch: {task.name} {end.why}{after}; stopping the other tasks",
              file=sys.stderr)
        return code if code > 0 else 1
    return 0


def cause_line(end: End) -> str | None:
    """The launcher's last line after a task failed: ``launch: worker 0 failed (exit 1):
    <the task's last line on stderr>``; None for other ends (a ps that exited 0 while
    needed has no error line: the launcher's first line says it all). A task a signal
    killed (``SIGKILL``: the OOM killer, a lost machine) wrote no line of its own."""
    if end.outcome != "failed" or end.task is None or not end.task.process.returncode:
        return None
    task, code = end.task, end.task.process.returncode
    if code < 0:
        return f"launch: {task.name} failed ({_killed_by(code)})"
    if not task.last_error_line:
        return f"launch: {task.name} failed (exit {code}) without a line on stderr"
    return f"launch: {task.name} failed (exit {code}): {task.last_error_line}"


def _killed_by(code: int) -> str:
    """``killed by SIGKILL`` for exit code -9."""
    try:
        return f"killed by {signal.Signals(-code).name}"
    except ValueError:
        return f"killed by signal {-code}"


def _starter(spec: LaunchSpec, watcher: reaper.Reaper,
             ended: TrainingEnded) -> Callable[[], list[tasks_lib.Task]]:
    """The function that starts the tasks once per run: this node's share of a multi-host
    cluster, or a local cluster on fresh ports."""
    node = spec.multi_host
    if node:
        def start() -> list[tasks_lib.Task]:
            return tasks_lib.start_node(spec, node, watcher, ended.env())
    else:
        def start() -> list[tasks_lib.Task]:
            return tasks_lib.start_local(spec, watcher, ended.env())
    return start


def run(spec: LaunchSpec) -> int:
    """Runs ``spec.command`` once per task of the cluster ``spec`` describes, until the job
    ends; returns the launcher's exit code."""
    # Before the namespace switch: an unprivileged launcher in its own user namespace may
    # no longer execute the interpreter it was started with.
    watcher = reaper.Reaper()
    isolation.isolate_launch(spec)
    ended = TrainingEnded()
    start = _starter(spec, watcher, ended)
    forwarder = Forwarder()
    previous = {s: signal.signal(s, forwarder) for s in (signal.SIGINT, signal.SIGTERM)}
    end = End("failed")  # Until _supervise returns: an error while it starts tasks.
    try:
        end, restart = _supervise(start, spec, forwarder, watcher, ended)
        code = _report(end, restart, spec)
    finally:
        # Tasks saving a checkpoint after SIGTERM or SIGINT get time, and no second signal
        # once the launcher has forwarded one.
        stop_end = End("signalled") if forwarder.received else end
        tasks_lib.stop(forwarder.tasks, watcher,
                       signum=None if forwarder.received else signal.SIGTERM,
                       grace=_grace(stop_end))
        watcher.close()
        ended.close()
        for task in forwarder.tasks:
            task.join_output(_OUTPUT_SECONDS)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    cause = cause_line(end)
    if cause:
        print(cause, file=sys.stderr, flush=True)
    return code
