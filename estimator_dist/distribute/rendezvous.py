"""Form a multi-worker cluster within a bounded time, or say which task was not reached.

``MultiWorkerMirroredStrategy()`` starts this task's gRPC server and then blocks inside
the TF runtime, holding Python's interpreter lock, until every chief and worker has
joined TF's coordination service (read: ``collective_all_reduce_strategy.py``,
``_initialize_multi_worker``). With a peer that never starts, a duplicate port or an
unresolvable host it waits without a word and without end, and SIGTERM does not stop it:
the runtime takes SIGTERM over for its preemption notifier. ``form_cluster``
wraps the strategy's construction in three steps:

1. **Pre-flight**: every address of the cluster must resolve, no two tasks may share an
   address, and this task's own port must be free. Each fault is one line at once.
2. **Probe**: this task listens on its own port with a plain TCP socket and connects to
   each peer's address until all answer, printing whom it still waits for every
   ``PROGRESS_SECONDS``. A peer answers through the same kind of socket while it probes,
   or through its gRPC server once it has moved on. Nothing of TensorFlow has started
   yet, so SIGTERM/SIGINT end the wait at once (``errors.TaskEnd``), and the deadline is
   one line naming the tasks not reached (``RendezvousError``).
3. **Join**: the socket is closed and the strategy is built. A peer lost after it
   answered (or another program on its port) would block this forever, so
   ``process_exit.exit_after`` (``faulthandler``'s watchdog, a C thread that needs no
   interpreter lock) ends the process with exit code 1 if the join outlasts the time
   left (at least ``MIN_JOIN_SECONDS``); the line printed before the join says so.

The strategy then runs TF's own gRPC runtime unchanged.
"""
from __future__ import annotations

import signal
import socket
import sys
import threading
import time
from typing import IO, TYPE_CHECKING, Any, Callable, Mapping, NoReturn, Sequence, Tuple, TypeVar

from estimator_dist import process_exit
from estimator_dist.distribute import cluster_sources
from estimator_dist.errors import TaskEnd, UsageError

if TYPE_CHECKING:
    from estimator_dist.distribute.cluster import TFConfig

DEFAULT_TIMEOUT_SECONDS = 300
# A task to reach: its name ("worker 1"), host and port.
Peer = Tuple[str, str, str]
_Strategy = TypeVar("_Strategy")
PROGRESS_SECONDS = 10
MIN_JOIN_SECONDS = 30  # TF's own join gets at least this long after every peer answered.
_PROBE_SECONDS = 0.5
_COLLECTIVE_TYPES = ("chief", "worker")  # The tasks a multi-worker strategy waits for.
# The clusters this process has joined (TFConfig JSON), with how many strategies it has
# built for each: its server holds the task's port from then on, and TensorFlow reuses
# that server for every later strategy and Estimator.
_JOINED: dict[str, int] = {}


class RendezvousError(UsageError):
    """The cluster could not form: a task is missing, unreachable or misconfigured."""


def _tasks(spec: Mapping[str, Sequence[str]],
           task_types: Sequence[str] | None = None) -> list[Peer]:
    """[(name, host, port)] of the cluster's tasks, e.g. ("worker 1", "10.0.0.2", "2222")."""
    return [(f"{task_type} {index}", *_split(address))
            for task_type, addresses in spec.items()
            if task_types is None or task_type in task_types
            for index, address in enumerate(addresses)]


def _split(address: str) -> tuple[str, str]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), port


def _check_port(name: str, port: str) -> int:
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise RendezvousError(f"rendezvous: the address of {name} must end in a port in "
                              f"[1, 65535]. Received: port {port!r}")
    return int(port)


def _resolve(name: str, host: str, port: int) -> list[str | int]:
    """The IP addresses of ``host``; an unresolvable host is one line at once."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise RendezvousError(f"rendezvous: {name} must have a resolvable host. Received: "
                              f"{host}:{port} ({reason})") from None
    return sorted({info[4][0] for info in infos})


def preflight(tf_config: TFConfig) -> None:
    """Checks every address of the cluster before this task starts anything.

    Raises:
      RendezvousError: an unresolvable host, a bad port, or two tasks at one address.
    """
    seen: dict[tuple[str | int, int], str] = {}
    port: str | int
    for name, host, port in _tasks(tf_config.cluster):
        port = _check_port(name, port)
        for ip in _resolve(name, host, port):
            other = seen.setdefault((ip, port), name)
            if other != name:
                raise RendezvousError(
                    f"rendezvous: every task must have its own address; {other} and {name} "
                    f"both have {ip}:{port}. Received: cluster {tf_config.cluster}")


def _listen(tf_config: TFConfig) -> socket.socket:
    """A plain TCP socket on this task's own port, so that peers see it is up.

    It never accepts: a peer's connect completes in the kernel's backlog and the peer
    closes it. TF's gRPC server listens on every interface, so the port must be free on
    all of them.
    """
    address = tf_config.cluster[tf_config.task_type][tf_config.task_index]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("", int(_split(address)[1])))
        sock.listen(64)
    except OSError as error:
        sock.close()
        raise RendezvousError(
            "TF_CONFIG must give this task a port free on this host (its gRPC server listens "
            f"there). Received: {tf_config.task_type} {tf_config.task_index} at {address} "
            f"({error.strerror})") from None
    return sock


def _reachable(host: str, port: int | str) -> bool:
    try:
        with socket.create_connection((host, int(port)), timeout=1.0):
            return True
    except OSError:
        return False


def describe(peers: Sequence[Peer]) -> str:
    """"worker 1 at 10.0.0.2:2222, ..." for [(name, host, port)]."""
    return ", ".join(f"{name} at {host}:{port}" for name, host, port in peers)


class _Stopped(Exception):
    """SIGTERM or SIGINT arrived while waiting.

    The signal is kept as an attribute, not read back from the message: a signal can land
    inside a codec (the connect encodes the peer's host with "idna"), and on Python 3.11
    and earlier a codec rewrites the message of an exception it can copy ("encoding with
    'idna' codec failed (_Stopped: SIGTERM)"); one with an ``__init__`` of its own it
    leaves alone.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise_stopped(signum: int, frame: Any) -> NoReturn:
    del frame  # Unused.
    raise _Stopped(signum)


def _probe(peers: Sequence[Peer], deadline: float, timeout: float, stream: IO[str]) -> None:
    """Connects to every peer until all answer; raises ``RendezvousError`` at the deadline."""
    start = time.monotonic()
    reported = start
    missing = list(peers)
    while True:
        missing = [p for p in missing if not _reachable(p[1], p[2])]
        if not missing:
            return
        now = time.monotonic()
        if now >= deadline:
            raise RendezvousError(
                f"rendezvous: could not reach {describe(missing)} within the rendezvous "
                f"timeout of {timeout} s; start every task of the cluster (or raise "
                "--rendezvous-timeout)")
        if now - reported >= PROGRESS_SECONDS:
            reported = now
            print(f"rendezvous: waiting for {describe(missing)}, {now - start:.0f} s "
                  f"(of {timeout} s)", file=stream, flush=True)
        time.sleep(_PROBE_SECONDS)


def wait_for_peers(tf_config: TFConfig, timeout: float, stream: IO[str] | None = None,
                   peer_types: Sequence[str] = _COLLECTIVE_TYPES) -> float:
    """Pre-flight checks, then waits until every other task of ``peer_types`` answers.

    Raises:
      RendezvousError: a pre-flight fault, or a peer not reached within ``timeout``.
      TaskEnd: SIGTERM or SIGINT while waiting (exit code 128 + the signal).
    """
    stream = stream or sys.stderr
    deadline = time.monotonic() + timeout
    preflight(tf_config)
    me = f"{tf_config.task_type} {tf_config.task_index}"
    peers = [t for t in _tasks(tf_config.cluster, peer_types) if t[0] != me]
    in_main = threading.current_thread() is threading.main_thread()
    signals = (signal.SIGTERM, signal.SIGINT) if in_main else ()  # Main thread only.
    previous = {s: signal.signal(s, _raise_stopped) for s in signals}
    listener = _listen(tf_config)
    try:
        _probe(peers, deadline, timeout, stream)
    except _Stopped as stop:
        process_exit.uncaught_task_end_in_one_line()  # A user's program may not catch it.
        raise TaskEnd(f"rendezvous: stopped by {signal.Signals(stop.signum).name} while "
                      f"waiting for {describe(peers)}", 128 + stop.signum) from None
    finally:
        listener.close()
        for signum, handler in previous.items():
            if handler is not None:  # None: installed outside Python; nothing to put back.
                signal.signal(signum, handler)
    return deadline


def wait_for_ps_cluster(tf_config: TFConfig, timeout: float | None = None,
                        stream: IO[str] | None = None) -> None:
    """For "parameter_server": the chief and workers wait until every other chief, worker
    and ps task answers (parameter servers start their gRPC server without waiting)."""
    if tf_config.task_type in _COLLECTIVE_TYPES:
        wait_for_peers(tf_config, DEFAULT_TIMEOUT_SECONDS if timeout is None else timeout,
                       stream, peer_types=_COLLECTIVE_TYPES + ("ps",))


def form_cluster(build: Callable[[], _Strategy], timeout: float | None = None, *,
                 tf_config: TFConfig | None = None, stream: IO[str] | None = None,
                 rebuilt: Callable[[int, float], None] | None = None) -> _Strategy:
    """Builds a multi-worker strategy with ``build()`` once the cluster can form.

    Args:
      build: a callable that builds the strategy (and so joins the cluster).
      timeout: seconds to wait for every chief and worker (default 300).
      tf_config: this task's ``cluster.TFConfig`` (default: from the environment).
      stream: where progress goes (default: stderr).
      rebuilt: called as ``rebuilt(count, timeout)`` after each later build in this
        process (a second config or Estimator), ``count`` being how many strategies it
        has built for the cluster: every task counts alike, so a barrier named by it
        keeps the tasks in step.

    Returns:
      What ``build()`` returned.

    Raises:
      RendezvousError (a UsageError): a pre-flight fault, or a peer not reached in time.
      TaskEnd: SIGTERM or SIGINT while waiting for peers (exit code 128 + the signal).

    A join that outlasts the time left ends the process with exit code 1
    (``process_exit.exit_after``: nothing else can end a join). Once this
    process has joined a cluster, building a strategy for it again skips the wait.
    """
    timeout = DEFAULT_TIMEOUT_SECONDS if timeout is None else timeout
    tf_config = tf_config or cluster_sources.task_from_env()
    joined = tf_config.to_json()
    if joined in _JOINED:  # A second config or Estimator in this process.
        strategy = build()
        _JOINED[joined] += 1
        if rebuilt is not None:
            rebuilt(_JOINED[joined], timeout)
        return strategy
    stream = stream or sys.stderr
    start = time.monotonic()
    deadline = wait_for_peers(tf_config, timeout, stream)
    left = max(MIN_JOIN_SECONDS, deadline - time.monotonic())
    print(f"rendezvous: every peer answered after {time.monotonic() - start:.0f} s; joining "
          f"TensorFlow's cluster (this task exits with code {process_exit.JOIN_EXIT_CODE} "
          f"if it has not formed in {left:.0f} s)", file=stream, flush=True)
    # The runtime holds the interpreter lock while it waits, so no Python code can time it
    # out, nor raise: only a C thread can end the process.
    with process_exit.exit_after(left):
        strategy = build()
    if threading.current_thread() is threading.main_thread():
        # The runtime took SIGTERM over for its preemption notifier, which Estimator does
        # not use: give it back to Python's handler, so that SIGTERM ends the task.
        signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGTERM))
    _JOINED[joined] = 1
    return strategy
