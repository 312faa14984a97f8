"""``python -m estimator_dist.launch``: run a local cluster of tasks with TF_CONFIG.

Starts one process per task on 127.0.0.1, each with its own ``TF_CONFIG``, prefixes
their output with the task name, forwards SIGINT/SIGTERM (then exits 128 + the signal,
whatever the tasks exit with), and ends the job as soon as any task ends the job:

- a task that fails (any role, the evaluator too), or a parameter server that exits while
  the chief or a worker still runs (they would wait for it forever): the launcher stops
  the rest and exits non-zero, unless ``--max-restarts`` lets it start the whole cluster
  again after a growing wait, resuming from the last checkpoint (``restarts``);
- a task stopped by SIGTERM or SIGINT sent to it alone: the launcher stops the rest,
  restarts nothing, and exits 128 + the signal, as when the signal comes to it.

A chief, worker or evaluator that exits 0 ends nothing: the job is done when all of them
have; parameter servers then get SIGTERM. If the launcher dies, even by SIGKILL, its
tasks die with it (``reaper``).
On Linux every task runs in one private network namespace, so no other address of the
host reaches their (unauthenticated) gRPC servers; elsewhere, or without permission for
a namespace, it refuses unless ``--allow-network-exposure`` is given (docs/security.md).

    python -m estimator_dist.launch --workers 2 --evaluator -- \
        python -m estimator_dist.train --strategy multi_worker

With ``--nodes N --node-rank I --hosts H1,...,HN`` it runs one node's share of a
multi-host cluster instead (one launcher per node, no cluster manager needed); every
node derives the same cluster from the same flags (see ``cluster.multi_host_cluster``).
Its tasks must be reachable from the other nodes, so with real hosts that mode runs in
the host's network namespace, every task's port open on every interface: keep the nodes
on a private network (docs/security.md). With loopback hosts only (``127.0.0.1``,
``localhost``) one node runs isolated as the local launcher does, and several nodes (all
on this machine, in the host's namespace) need ``--allow-network-exposure``.
"""
import argparse
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import typing

from estimator_dist.commands import cli
from estimator_dist import checkpoint_step
from estimator_dist.supervisor import isolation, reaper, restarts
from estimator_dist.distribute import cluster
from estimator_dist.errors import UsageError

_POLL_SECONDS = 0.2
_STOP_GRACE_SECONDS = 10
_BASE_PORT = 2222
# What one local task takes of the machine, for the bound on task counts: open files in
# this process (its port probe and output pipe, with room to spare) and memory (a process
# that has imported TensorFlow holds about this much before it trains).
_FILES_PER_TASK = 4
_MEMORY_PER_TASK = 256 * 2**20
# After a forwarded SIGTERM/SIGINT tasks save a checkpoint before they exit: give them time,
# and no second signal (which would stop them at once).
_SIGNALLED_GRACE_SECONDS = 30
# Once a parameter server has ended, the chief and workers cannot save (the variables lived
# there) and wait for it inside TensorFlow: waiting longer for them gains nothing.
_PS_GONE_GRACE_SECONDS = 3


def free_ports(count):
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


def launch_parser(subparsers=None):
    """The parser of the launch command (standalone, or added to ``subparsers``)."""
    parser = cli.command_parser(
        "launch", "Run COMMAND once per task of a local cluster, each with its TF_CONFIG.",
        subparsers)
    parser.add_argument("--workers", type=cli.non_negative_int, required=True,
                        help="training workers (worker 0 is the chief); per node with --nodes; "
                             f"with --ps and --evaluator at most {max_local_tasks():,} tasks "
                             "on this machine (open files and memory)")
    parser.add_argument("--evaluator", action="store_true", help="add an evaluator task")
    parser.add_argument("--ps", type=cli.non_negative_int, default=0,
                        help="parameter servers (adds a chief; default: 0); per node with "
                             "--nodes; counted in the --workers bound")
    parser.add_argument("--timeout", type=cli.non_negative_int, default=0,
                        help="stop every task and fail after this many seconds (0: no limit)")
    parser.add_argument("--max-restarts", type=cli.non_negative_int, default=0, metavar="N",
                        help="when a task fails, stop the others and start the whole cluster "
                             "again, resuming from the last checkpoint, up to N times, at "
                             f"most {restarts.MAX_RESTARTS} (default: 0); the wait before a "
                             f"restart is {restarts.FIRST_WAIT_SECONDS} s, doubling up to "
                             f"{restarts.MAX_WAIT_SECONDS} s, reset by a run of "
                             f"{restarts.RESET_AFTER_SECONDS // 60} minutes; a command that "
                             f"fails at start {restarts.START_FAILURES} times in a row "
                             "(within "
                             f"{restarts.START_SECONDS} s, no new checkpoint) is not restarted")
    parser.add_argument(isolation.EXPOSURE_FLAG, action="store_true",
                        help="run the tasks in the host's network namespace, where every "
                             "interface reaches their unauthenticated gRPC servers "
                             "(default: a private namespace, loopback only; see "
                             "docs/security.md)")
    _add_multi_host_flags(parser)
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- then the command every task runs")
    return parser


def _validate_launch_args(args):
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("COMMAND must follow --. Received: no command")
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1. Received: --workers {args.workers}")
    tasks = args.workers + args.ps + int(args.evaluator)
    if tasks > max_local_tasks():
        raise UsageError(
            f"--workers, --ps and --evaluator must add up to at most {max_local_tasks():,} "
            f"tasks on this machine ({_FILES_PER_TASK} of its {_open_files_allowed():,} open "
            f"files and {_MEMORY_PER_TASK // 2**20} MiB of its {_memory() // 2**20:,} MiB of "
            f"memory each). Received: {tasks:,} tasks")
    if args.max_restarts > restarts.MAX_RESTARTS:
        raise UsageError(
            f"--max-restarts must be at most {restarts.MAX_RESTARTS} (each restart waits up "
            f"to {restarts.MAX_WAIT_SECONDS} s; start the launcher again to go on from the "
            f"last checkpoint). Received: --max-restarts {args.max_restarts}")
    if args.max_restarts and args.nodes:
        raise UsageError(
            "--max-restarts must be 0 with --nodes: each node's launcher sees only its own "
            "tasks, so the launchers cannot agree on restarting the whole cluster (let the "
            "cluster manager restart the nodes, docs/cluster.md). Received: --max-restarts "
            f"{args.max_restarts} --nodes {args.nodes}")
    return command


def _open_files_allowed():
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 2**20


def _memory():
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def max_local_tasks():
    """How many tasks one launcher can start here: bounded by this process's open files
    and the machine's memory."""
    return max(1, min(_open_files_allowed() // _FILES_PER_TASK,
                      _memory() // _MEMORY_PER_TASK))


def _isolate(args):
    """Closes the cluster to the network unless the user allowed exposure, or says where
    it listens when its nodes are real hosts (which must reach each other)."""
    if args.allow_network_exposure:
        return
    if not args.nodes:
        isolation.isolate_network()
        return
    if not all(isolation.is_loopback(host) for host in args.hosts):
        first = args.base_port + args.node_rank * (args.workers + args.ps)
        last = first + args.workers + args.ps - 1
        ports = f"port {first}" if first == last else f"ports {first}-{last}"
        print(f"launch: node {args.node_rank}'s tasks listen on every interface of this host "
              f"({ports}) and take unauthenticated connections: keep the nodes on a private "
              "network or behind a firewall (docs/security.md)", file=sys.stderr, flush=True)
        return
    if args.nodes > 1:
        raise UsageError(
            f"--hosts on loopback only need {isolation.EXPOSURE_FLAG} with --nodes "
            f"{args.nodes}: every node is this machine, and each launcher's private network "
            "namespace would hide its tasks from the others (the flag runs them in the "
            "host's, their ports open on every interface, docs/security.md; one launcher "
            f"without --nodes needs no flag). Received: --hosts {','.join(args.hosts)}")
    isolation.isolate_network()


def _pipe_lines(stream, prefix, out):
    for line in iter(stream.readline, b""):
        out.write(f"[{prefix}] {line.decode(errors='replace')}")
        out.flush()
    stream.close()


class _Task:
    """One task process and the thread that prefixes its output."""

    def __init__(self, task_type, index, command, tf_config):
        self.name = f"{task_type} {index}"
        self.task_type = task_type
        env = dict(os.environ, TF_CONFIG=tf_config)
        self.process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        self.reader = threading.Thread(target=_pipe_lines, daemon=True,
                                       args=(self.process.stdout, self.name, sys.stdout))
        self.reader.start()

    def signal(self, signum):
        if self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signum)
            except ProcessLookupError:
                pass


def _start(command, num_workers, num_ps, evaluator, watcher):
    spec, tasks = cluster.local_cluster(free_ports(num_workers + num_ps), num_workers,
                                        num_ps=num_ps, evaluator=evaluator)
    return _start_tasks(command, spec, tasks, watcher)


def _start_tasks(command, spec, tasks, watcher):
    """Starts one ``_Task`` per (task_type, index) of cluster ``spec``, each watched by
    ``watcher`` (a ``reaper.Reaper``)."""
    started = []
    for task_type, index in tasks:
        tf_config = cluster.TFConfig(spec, task_type, index).to_json()
        try:
            started.append(_Task(task_type, index, command, tf_config))
        except OSError as error:
            _stop(started, watcher)
            raise UsageError(f"COMMAND must be a program that can run. Received: "
                             f"{command[0]!r} ({error.strerror})") from None
        watcher.watch(started[-1].process.pid)
    return started
def _add_multi_host_flags(parser):
    group = parser.add_argument_group(
        "multi-host (one launcher per node, as torchrun --nnodes --node-rank)")
    group.add_argument("--nodes", type=cli.positive_int, metavar="N",
                       help="nodes of the cluster; run one launcher on each (default: this "
                            "machine alone, tasks on 127.0.0.1)")
    group.add_argument("--node-rank", type=cli.non_negative_int, metavar="I",
                       help="this node's rank in [0, N); node 0 runs the chief and evaluator")
    group.add_argument("--hosts", metavar="H1,H2,...",
                       help="every node's host name or address, in rank order")
    group.add_argument("--base-port", type=cli.positive_int, default=_BASE_PORT, metavar="P",
                       help="node I's tasks listen on P + I * (workers + ps) onwards "
                            f"(default: {_BASE_PORT})")


def _validate_multi_host(args):
    multi_host = (args.nodes, args.node_rank, args.hosts)
    if all(value is None for value in multi_host):
        return
    if any(value is None for value in multi_host):
        raise UsageError("--nodes, --node-rank and --hosts go together. Received: "
                     f"--nodes {args.nodes} --node-rank {args.node_rank} --hosts {args.hosts}")
    hosts = [h.strip() for h in args.hosts.split(",")]
    if len(hosts) != args.nodes or not all(hosts):
        raise UsageError(f"--hosts must name {args.nodes} hosts (one per node), comma-separated. "
                     f"Received: --hosts {args.hosts}")
    if args.node_rank >= args.nodes:
        raise UsageError(f"--node-rank must be in [0, {args.nodes}). "
                     f"Received: --node-rank {args.node_rank}")
    last = args.base_port + args.nodes * (args.workers + args.ps) - 1
    if last > 65535:
        raise UsageError(f"--base-port leaves no room for every task's port (the last would be "
                     f"{last}). Received: --base-port {args.base_port}")
    args.hosts = hosts


def _start_node(command, args, watcher):
    """Starts this node's tasks of a multi-host cluster."""
    spec, tasks, nodes = cluster.multi_host_cluster(args.hosts, args.base_port, args.workers,
                                                    args.ps, args.evaluator)
    mine = [task for task, node in zip(tasks, nodes) if node == args.node_rank]
    return _start_tasks(command, spec, mine, watcher)


def _stop(tasks, watcher, signum=signal.SIGTERM, grace=_STOP_GRACE_SECONDS):
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


class _Forwarder:
    """The launcher's SIGTERM/SIGINT handler: records the signal and forwards it to the
    tasks running now (to a group started while it arrived, once the group is up)."""

    def __init__(self):
        self.received = []
        self.tasks = []  # The group started last.
        self._forwarded = False

    def __call__(self, signum, frame):
        del frame  # Unused.
        self.received.append(signum)
        self._forward(signum)

    def _forward(self, signum):
        self._forwarded = True
        for task in self.tasks:
            task.signal(signum)

    def watch(self, tasks):
        """Forwards signals to ``tasks`` from now on, and one that came while they started."""
        self.tasks, self._forwarded = tasks, False
        if self.received and not self._forwarded:
            self._forward(self.received[0])


class _End(typing.NamedTuple):
    """How a run of the cluster ended: ``outcome`` is "done", "failed" (a restart may
    follow), "stopped" (a task was stopped by ``signum``), "timeout" (``why``: "running" or
    "waiting" to restart) or "signalled" (the launcher got ``signum``); ``task`` ended it
    and ``why`` says how."""
    outcome: str
    task: typing.Optional[_Task] = None
    why: str = ""
    signum: typing.Optional[int] = None


def _names(tasks):
    names = [t.name for t in tasks]
    return " and ".join(names) if len(names) < 3 else ", ".join(names[:-1]) + ", and " + names[-1]


def _end_of(task, trainers):
    """The ``_End`` that ``task`` makes of the run by its exit, or None (running, or a
    chief, worker or evaluator done, or a ps no trainer needs any more)."""
    code = task.process.poll()
    if code is None:
        return None
    signum = restarts.stop_signal(code)
    if signum:
        return _End("stopped", task, f"was stopped by {signal.Signals(signum).name} "
                                     f"({restarts.describe_exit(code)})", signum)
    if code != 0:
        return _End("failed", task, f"failed with {restarts.describe_exit(code)}")
    running = [t for t in trainers if t.process.poll() is None]
    if task.task_type == "ps" and running:
        return _End("failed", task, f"ended with exit code 0 while {_names(running)} still "
                                    f"need{'s' if len(running) == 1 else ''} it")
    return None


def _watch(tasks, deadline, forwarder):
    """Waits for the run to end: the launcher got a signal, a task ends the job
    (``_end_of``), every task but the ps tasks exited 0, or the deadline passed."""
    trainers = [t for t in tasks if t.task_type in ("chief", "worker")]
    finishing = [t for t in tasks if t.task_type != "ps"]
    while True:
        if forwarder.received:
            return _End("signalled", signum=forwarder.received[0])
        for task in tasks:
            end = _end_of(task, trainers)
            if end:
                return end
        if all(t.process.poll() == 0 for t in finishing):
            return _End("done")
        if deadline and time.monotonic() > deadline:
            return _End("timeout", why="running")
        time.sleep(_POLL_SECONDS)


def _wait_to_restart(seconds, deadline, forwarder):
    """Sleeps ``seconds`` unless the launcher gets a signal or the deadline passes first;
    returns the ``_End`` of that, else None."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if forwarder.received:
            return _End("signalled", signum=forwarder.received[0])
        if deadline and time.monotonic() > deadline:
            return _End("timeout", why="waiting")
        time.sleep(min(_POLL_SECONDS, max(0.0, until - time.monotonic())))
    return None


def _supervise(start, command, args, forwarder, watcher):
    """Runs the cluster ``start()`` starts, again after a failure while ``--max-restarts``
    allows and the command does not fail at start; returns the last run's ``_End`` and
    the restarts made. ``forwarder.tasks`` is the group started last, for the caller to
    stop."""
    deadline = time.monotonic() + args.timeout if args.timeout else None
    model_dir = restarts.model_dir_of(command)
    backoff = restarts.Backoff()
    restart = at_start = 0
    while True:
        started, step = time.monotonic(), checkpoint_step.newest_step(model_dir)
        forwarder.watch(start())
        end = _watch(forwarder.tasks, deadline, forwarder)
        if end.outcome != "failed":
            return end, restart
        ran = time.monotonic() - started
        failed_at_start = restarts.failed_at_start(
            ran, step, checkpoint_step.newest_step(model_dir))
        at_start = at_start + 1 if failed_at_start else 0
        if restart == args.max_restarts or at_start == restarts.START_FAILURES:
            return end, restart
        _stop(forwarder.tasks, watcher, grace=_grace(end))
        if forwarder.received:  # Stopped while the failed group stopped: no restart.
            return _End("signalled", signum=forwarder.received[0]), restart
        restart += 1
        wait = backoff.next_wait(ran)
        print(restarts.restart_line(end.task.name, end.why, restart, args.max_restarts, wait,
                                    model_dir), file=sys.stderr, flush=True)
        waited = _wait_to_restart(wait, deadline, forwarder)
        if waited:
            return waited, restart


def _grace(end):
    """How long the tasks left after ``end`` get to stop after SIGTERM."""
    if end.outcome == "signalled":
        return _SIGNALLED_GRACE_SECONDS
    if end.task is not None and end.task.task_type == "ps":
        return _PS_GONE_GRACE_SECONDS
    return _SIGNALLED_GRACE_SECONDS if end.outcome == "stopped" else _STOP_GRACE_SECONDS


def _report(end, restart, args):
    """Prints the line of an ``_End`` other than done; returns the exit code."""
    if end.outcome == "signalled":
        return 128 + end.signum
    if end.outcome == "timeout":
        print(f"launch: tasks still running after --timeout {args.timeout} s; stopping them"
              if end.why == "running" else
              f"launch: --timeout {args.timeout} s ran out while waiting to restart",
              file=sys.stderr)
        return 124
    if end.outcome == "stopped":
        print(f"launch: {end.task.name} {end.why}; stopping the other tasks", file=sys.stderr)
        return 128 + end.signum
    if end.outcome == "failed":
        code = end.task.process.returncode
        after = f" after {restart} restart{'s' if restart > 1 else ''}" if restart else ""
        if restart < args.max_restarts:  # Restarts left: the command failed at start.
            after = (f" at start in {restarts.START_FAILURES} runs in a row (each within "
                     f"{restarts.START_SECONDS} s, no new checkpoint): a command that fails "
                     "at start is not restarted")
        print(f"launch: {end.task.name} {end.why}{after}; stopping the other tasks",
              file=sys.stderr)
        return code if code > 0 else 1
    return 0


def launch_command(args):
    """Runs the cluster ``args`` describe; returns the process exit code."""
    command = _validate_launch_args(args)
    _validate_multi_host(args)
    # Before the namespace switch: an unprivileged launcher in its own user namespace may
    # no longer execute the interpreter it was started with.
    watcher = reaper.Reaper()
    _isolate(args)
    if args.nodes:
        def start():
            return _start_node(command, args, watcher)
    else:
        def start():
            return _start(command, args.workers, args.ps, args.evaluator, watcher)
    forwarder = _Forwarder()
    previous = {s: signal.signal(s, forwarder) for s in (signal.SIGINT, signal.SIGTERM)}
    end = _End("failed")  # Until _supervise returns: an error while it starts tasks.
    try:
        end, restart = _supervise(start, command, args, forwarder, watcher)
        return _report(end, restart, args)
    finally:
        # Tasks saving a checkpoint after SIGTERM or SIGINT get time, and no second signal
        # once the launcher has forwarded one.
        if forwarder.received:
            end = _End("signalled")
        _stop(forwarder.tasks, watcher, signum=None if forwarder.received else signal.SIGTERM,
              grace=_grace(end))
        watcher.close()
        for task in forwarder.tasks:
            task.reader.join(timeout=5)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def main(argv=None):
    return cli.run(launch_parser(), launch_command, argv)
