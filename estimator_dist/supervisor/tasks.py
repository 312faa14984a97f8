"""The task processes of a launch: one per task of the cluster, each with its TF_CONFIG.

Each task runs in a process group of its own (so a signal reaches what it starts too),
its output (stdout and stderr) prefixed with its name on the launcher's stdout, the last
line it wrote to stderr kept (``Task.last_error_line``: a failed task's own reason, which
the launcher repeats last); the launcher's reaper (``reaper.Reaper``) watches every group
it starts. A group is started and stopped whole.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO, TYPE_CHECKING, Callable, Mapping, Sequence

from estimator_dist.distribute import cluster
from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    from estimator_dist.supervisor.reaper import Reaper
    from estimator_dist.supervisor.spec import LaunchSpec, MultiHost

STOP_GRACE_SECONDS = 10
# One line at a time on the launcher's stdout, whichever task's stream it comes from.
_OUT_LOCK = threading.Lock()


def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports that were free on 127.0.0.1 a moment ago."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _pipe_lines(stream: IO[bytes], prefix: str, out: IO[str],
                kept: Callable[[str], None] | None = None) -> None:
    """Copies ``stream`` to ``out``, each line prefixed; each non-blank line goes to
    ``kept`` too (if given)."""
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace")
        with _OUT_LOCK:
            out.write(f"[{prefix}] {line}")
            out.flush()
        if kept is not None and line.strip():
            kept(line.strip())
    stream.close()


class Task:
    """One task process and the threads that prefix its output."""

    def __init__(self, task_type: str, index: int, command: Sequence[str], tf_config: str,
                 env: Mapping[str, str] | None = None) -> None:
        self.name = f"{task_type} {index}"
        self.task_type = task_type
        self.last_error_line = ""  # The last non-blank line the task wrote to stderr.
        env = dict(os.environ, **(env or {}), TF_CONFIG=tf_config)
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, start_new_session=True)
        self._readers = [
            threading.Thread(target=_pipe_lines, daemon=True,
                             args=(self.process.stdout, self.name, sys.stdout)),
            threading.Thread(target=_pipe_lines, daemon=True,
                             args=(self.process.stderr, self.name, sys.stdout, self._keep))]
        for reader in self._readers:
            reader.start()

    def _keep(self, line: str) -> None:
        self.last_error_line = line

    def join_output(self, timeout: float) -> None:
        """Waits up to ``timeout`` s for the task's output to be copied to its end (the
        task and whatever it started closed their streams)."""
        deadline = time.monotonic() + timeout
        for reader in self._readers:
            reader.join(max(0.0, deadline - time.monotonic()))

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                pass


def start_local(launch: LaunchSpec, watcher: Reaper, env: Mapping[str, str]) -> list[Task]:
    """Starts every task of ``launch``'s local cluster on free ports of 127.0.0.1, each with
    ``env`` added to its environment."""
    spec, tasks = cluster.local_cluster(free_ports(launch.workers + launch.ps), launch.workers,
                                        num_ps=launch.ps, evaluator=launch.evaluator)
    return _start_tasks(launch.command, spec, tasks, watcher, env)


def start_node(launch: LaunchSpec, node: MultiHost, watcher: Reaper,
               env: Mapping[str, str]) -> list[Task]:
    """Starts this node's tasks (``node``, ``launch.multi_host``) of ``launch``'s multi-host
    cluster, each with ``env`` added to its environment."""
    spec, tasks, nodes = cluster.multi_host_cluster(node.hosts, node.base_port,
                                                    launch.workers, launch.ps, launch.evaluator)
    mine = [task for task, rank in zip(tasks, nodes) if rank == node.node_rank]
    return _start_tasks(launch.command, spec, mine, watcher, env)


def _start_tasks(command: Sequence[str], spec: cluster.Cluster, tasks: Sequence[cluster.Task],
                 watcher: Reaper, env: Mapping[str, str]) -> list[Task]:
    """Starts one ``Task`` per (task_type, index) of cluster ``spec``, each watched by
    ``watcher`` (a ``reaper.Reaper``)."""
    started = []
    for task_type, index in tasks:
        tf_config = cluster.TFConfig(spec, task_type, index).to_json()
        try:
            started.append(Task(task_type, index, command, tf_config, env))
        except OSError as error:
            stop(started, watcher)
            raise UsageError(f"COMMAND must be a program that can run. Received: "
                             f"{command[0]!r} ({error.strerror})") from None
        watcher.watch(started[-1].process.pid)
    return started


def stop(tasks: Sequence[Task], watcher: Reaper, signum: int | None = signal.SIGTERM,
         grace: float = STOP_GRACE_SECONDS) -> None:
    """Signals the tasks (unless ``signum`` is None), then kills those alive after ``grace``;
    ``watcher`` forgets each once it has ended."""
    for task in tasks:
        if signum is not None:
            task.signal(signum)
    deadline = time.monotonic() + grace
    for task in tasks:
        try:
            task.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            task.signal(signal.SIGKILL)
            task.process.wait()
        watcher.forget(task.process.pid)
