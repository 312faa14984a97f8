"""``python -m estimator_dist.launch``: run a local cluster of tasks with TF_CONFIG.

Starts one process per task on 127.0.0.1, each with its own ``TF_CONFIG``, prefixes
their output with the task name, forwards SIGINT/SIGTERM, and exits non-zero as soon as
any task fails (stopping the rest). Parameter servers run until the others finish.

    python -m estimator_dist.launch --workers 2 --evaluator -- \
        python -m estimator_dist.train --strategy multi_worker
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from estimator_dist import cli, cluster

_POLL_SECONDS = 0.2
_STOP_GRACE_SECONDS = 10


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


def launch_parser():
    parser = cli.OneLineParser(
        prog="python -m estimator_dist.launch",
        description="Run COMMAND once per task of a local cluster, each with its TF_CONFIG.")
    parser.add_argument("--workers", type=cli.non_negative_int, required=True,
                        help="training workers (worker 0 is the chief)")
    parser.add_argument("--evaluator", action="store_true", help="add an evaluator task")
    parser.add_argument("--ps", type=cli.non_negative_int, default=0,
                        help="parameter servers (adds a chief; default: 0)")
    parser.add_argument("--timeout", type=cli.non_negative_int, default=0,
                        help="stop every task and fail after this many seconds (0: no limit)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="-- then the command every task runs")
    return parser


def _validate_launch_args(parser, args):
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("COMMAND must follow --. Received: no command")
    if args.workers < 1:
        parser.error(f"--workers must be at least 1. Received: --workers {args.workers}")
    return command


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


def _start(command, num_workers, num_ps, evaluator):
    spec, tasks = cluster.local_cluster(free_ports(num_workers + num_ps), num_workers,
                                        num_ps=num_ps, evaluator=evaluator)
    return [_Task(task_type, index, command,
                  json.dumps({"cluster": spec, "task": {"type": task_type, "index": index}}))
            for task_type, index in tasks]


def _stop(tasks, signum=signal.SIGTERM):
    for task in tasks:
        task.signal(signum)
    deadline = time.monotonic() + _STOP_GRACE_SECONDS
    for task in tasks:
        try:
            task.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            task.signal(signal.SIGKILL)
            task.process.wait()


def _supervise(tasks, timeout):
    """Waits for the non-ps tasks; returns the exit code of the whole cluster."""
    deadline = time.monotonic() + timeout if timeout else None
    finishing = [t for t in tasks if t.task_type != "ps"]
    while True:
        codes = {t.name: t.process.poll() for t in finishing}
        failed = {name: code for name, code in codes.items() if code not in (None, 0)}
        if failed:
            name, code = next(iter(failed.items()))
            print(f"launch: {name} failed with exit code {code}; stopping the other tasks",
                  file=sys.stderr)
            return code if code > 0 else 1
        if all(code == 0 for code in codes.values()):
            return 0
        if deadline and time.monotonic() > deadline:
            print(f"launch: tasks still running after --timeout {timeout} s; stopping them",
                  file=sys.stderr)
            return 124
        time.sleep(_POLL_SECONDS)


def main(argv=None):
    parser = launch_parser()
    args = parser.parse_args(argv)
    command = _validate_launch_args(parser, args)
    tasks = _start(command, args.workers, args.ps, args.evaluator)
    received = []

    def forward(signum, frame):
        del frame  # Unused.
        received.append(signum)
        for task in tasks:
            task.signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = _supervise(tasks, args.timeout)
    finally:
        _stop(tasks)
        for task in tasks:
            task.reader.join(timeout=5)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received and code == 0:
        return 128 + received[0]
    return code


if __name__ == "__main__":
    sys.exit(main())
