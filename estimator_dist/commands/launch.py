"""``python -m estimator_dist.launch``: run a local cluster of tasks with TF_CONFIG.

Starts one process per task on 127.0.0.1, each with its own ``TF_CONFIG``, prefixes
their output with the task name, forwards SIGINT/SIGTERM (then exits 128 + the signal,
whatever the tasks exit with), and ends the job as soon as any task ends the job
(``supervisor.task_ends``): a task that fails, or a parameter server that exits while the
chief or a worker still runs, fails it, unless ``--max-restarts`` lets the launcher start
the whole cluster again after a growing wait, resuming from the last checkpoint
(``supervisor.restarts``); a task stopped by SIGTERM or SIGINT sent to it alone stops it,
restarting nothing. If the launcher dies, even by SIGKILL, its tasks die with it
(``supervisor.reaper``).
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

This module is the front end: the flags, checked once into a ``spec.LaunchSpec``. The
launch itself (starting the tasks, watching them, restarting, forwarding signals,
stopping) is ``supervisor.supervise``.
"""
from __future__ import annotations

import argparse
from typing import Any, Sequence

from estimator_dist.commands import cli
from estimator_dist.errors import UsageError
from estimator_dist.supervisor import capacity, isolation, restarts, spec, supervise

_BASE_PORT = 2222


def launch_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of the launch command (standalone, or added to ``subparsers``)."""
    parser = cli.command_parser(
        "launch", "Run COMMAND once per task of a local cluster, each with its TF_CONFIG.",
        subparsers)
    parser.add_argument("--workers", type=cli.non_negative_int, required=True,
                        help="training workers (worker 0 is the chief); per node with --nodes; "
                             f"with --ps and --evaluator at most "
                             f"{capacity.max_local_tasks():,} tasks on this machine (open "
                             "files and memory)")
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


def _add_multi_host_flags(parser: argparse.ArgumentParser) -> None:
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


def _validate_launch_args(args: argparse.Namespace) -> list[str]:
    """Checks the flags of every launch; returns the command after ``--``."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("COMMAND must follow --. Received: no command")
    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1. Received: --workers {args.workers}")
    tasks = args.workers + args.ps + int(args.evaluator)
    if tasks > capacity.max_local_tasks():
        raise UsageError(
            f"--workers, --ps and --evaluator must add up to at most "
            f"{capacity.max_local_tasks():,} tasks on this machine ({capacity.FILES_PER_TASK} "
            f"of its {capacity.open_files_allowed():,} open files and "
            f"{capacity.MEMORY_PER_TASK // 2**20} MiB of its {capacity.memory() // 2**20:,} "
            f"MiB of memory each). Received: {tasks:,} tasks")
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


def _validate_multi_host(args: argparse.Namespace) -> spec.MultiHost | None:
    """Checks the multi-host flags; returns this node's share (None without them)."""
    multi_host = (args.nodes, args.node_rank, args.hosts)
    if all(value is None for value in multi_host):
        return None
    if any(value is None for value in multi_host):
        raise UsageError("--nodes, --node-rank and --hosts go together. Received: "
                         f"--nodes {args.nodes} --node-rank {args.node_rank} --hosts {args.hosts}")
    hosts = [h.strip() for h in args.hosts.split(",")]
    if len(hosts) != args.nodes or not all(hosts):
        raise UsageError(f"--hosts must name {args.nodes} hosts (one per node), "
                         f"comma-separated. Received: --hosts {args.hosts}")
    if args.node_rank >= args.nodes:
        raise UsageError(f"--node-rank must be in [0, {args.nodes}). "
                         f"Received: --node-rank {args.node_rank}")
    last = args.base_port + args.nodes * (args.workers + args.ps) - 1
    if last > 65535:
        raise UsageError(f"--base-port leaves no room for every task's port (the last "
                         f"would be {last}). Received: --base-port {args.base_port}")
    return spec.MultiHost(args.nodes, args.node_rank, tuple(hosts), args.base_port)


def launch_spec(args: argparse.Namespace) -> spec.LaunchSpec:
    """The launch the parsed flags ``args`` describe, checked (``UsageError`` naming the
    flag otherwise); ``args`` is left as parsed."""
    command = _validate_launch_args(args)
    return spec.LaunchSpec(tuple(command), args.workers, ps=args.ps, evaluator=args.evaluator,
                           timeout=args.timeout, max_restarts=args.max_restarts,
                           allow_network_exposure=args.allow_network_exposure,
                           multi_host=_validate_multi_host(args))


def launch_command(args: argparse.Namespace) -> int:
    """Runs the cluster ``args`` describe; returns the process exit code."""
    return supervise.run(launch_spec(args))


def main(argv: Sequence[str] | None = None) -> int:
    return cli.run(launch_parser(), launch_command, argv)
