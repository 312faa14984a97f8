"""The task processes of a launch: one per task of the cluster, each with its TF_CONFIG.

Each task runs in a process group of its own (so a signal reaches what it starts too),
its output prefixed with its name; the launcher's reaper (``reaper.Reaper``) watches
every group it starts. A group is started and stopped whole.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import IO, TYPE_CHECKING, Sequence

from estimator_dist.distribute import cluster
from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    from estimator_dist.supervisor.reaper import Reaper
    from estimator_dist.supervisor.spec import LaunchSpec, MultiHost

STOP_GRACE_SECONDS = 10


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


def _pipe_lines(stream: IO[bytes], prefix: str, out: IO[str]) -> None:
    for line in iter(stream.readline, b""):
        out.write(f"[{prefix}] {line.decode(errors='replace')}")
        out.flush()
    stream.close()


class Task:
    """One task process and the thread that prefixes its output."""

    def __init__(self, task_type: str, index: int, command: Sequence[str], tf_config: str) -> None:
        self.name = f"{task_type} {index}"
        self.task_type = task_type
        env = dict(os.environ, TF_CONFIG=tf_config)
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self.reader = threading.Thread(target=_pipe_lines, daemon=True,
                                       args=(self.process.stdout, self.name, sys.stdout))
        self.reader.start()

    def signal(self, signum: int) -> None:
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                pass


def start_local(launch: LaunchSpec, watcher: Reaper) -> list[Task]:
    """Starts every task of ``launch``'s local cluster on free ports of 127.0.0.1."""
    spec, tasks = cluster.local_cluster(free_ports(launch.workers + launch.ps), launch.workers,
                                        num_ps=launch.ps, evaluator=launch.evaluator)
    return _start_tasks(launch.command, spec, tasks, watcher)


def start_node(launch: LaunchSpec, node: MultiHost, watcher: Reaper) -> list[Task]:
    """Starts this node's tasks (``node``, ``launch.multi_host``) of ``launch``'s multi-host
    cluster."""
    spec, tasks, nodes = cluster.multi_host_cluster(node.hosts, node.base_port,
                                                    launch.workers, launch.ps, launch.evaluator)
    mine = [task for task, rank in zip(tasks, nodes) if rank == node.node_rank]
    return _start_tasks(launch.command, spec, mine, watcher)


def _start_tasks(command: Sequence[str], spec: cluster.Cluster, tasks: Sequence[cluster.Task],
                 watcher: Reaper) -> list[Task]:
    """Starts one ``Task`` per (task_type, index) of cluster ``spec``, each watched by
    ``watcher`` (a ``reaper.Reaper``)."""
    started = []
    for task_type, index in tasks:
        tf_config = cluster.TFConfig(spec, task_type, index).to_json()
        try:
            started.append(Task(task_type, index, command, tf_config))
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
