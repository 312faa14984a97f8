"""How a task's exit ends a run of the cluster.

- A task that fails (any role, the evaluator too), or a parameter server that exits
  while the chief or a worker still runs (they would wait for it forever): the run
  failed, and a restart may follow (``restarts``).
- A task stopped by SIGTERM or SIGINT sent to it alone: the run was stopped, and nothing
  restarts.
- A chief, worker or evaluator that exits 0 ends nothing: the run is done when all of
  them have (the parameter servers then get SIGTERM).
"""
from __future__ import annotations

import signal
import typing
from typing import Sequence

from estimator_dist.supervisor import restarts
from estimator_dist.supervisor.tasks import Task


class End(typing.NamedTuple):
    """How a run of the cluster ended: ``outcome`` is "done", "failed" (a restart may
    follow), "stopped" (a task was stopped by ``signum``), "timeout" (``why``: "running" or
    "waiting" to restart) or "signalled" (the launcher got ``signum``); ``task`` ended it
    and ``why`` says how."""
    outcome: str
    task: typing.Optional[Task] = None
    why: str = ""
    signum: typing.Optional[int] = None


def _names(tasks: Sequence[Task]) -> str:
    names = [t.name for t in tasks]
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + ", and " + names[-1]


def end_of(task: Task, trainers: Sequence[Task]) -> End | None:
    """The ``End`` that ``task`` makes of the run by its exit, or None (running, or a
    chief, worker or evaluator done, or a ps no trainer needs any more)."""
    code = task.process.poll()
    if code is None:
        return None
    signum = restarts.stop_signal(code)
    if signum:
        return End("stopped", task, f"was stopped by {signal.Signals(signum).name} "
                                    f"({restarts.describe_exit(code)})", signum)
    if code != 0:
        return End("failed", task, f"failed with {restarts.describe_exit(code)}")
    running = [t for t in trainers if t.process.poll() is None]
    if task.task_type == "ps" and running:
        return End("failed", task, f"ended with exit code 0 while {_names(running)} still "
                                   f"need{'s' if len(running) == 1 else ''} it")
    return None
