"""Fail fast when a multi-worker peer is lost, instead of retrying forever, naming it.

When a worker of a ``MultiWorkerMirroredStrategy`` cluster dies, the collectives of the
others fail with ``UnavailableError``. Estimator's monitored session treats that error as
a preemption and re-creates the session, but the aborted collective executor never
recovers in the same process ("Restart your program to reset"), so training loops on
the failure without end. ``PeerFailureHook`` ends the run on the first re-created
session, so the process exits non-zero and the cluster manager can restart the job
from its last checkpoint.

``silent_peers`` tells which peers are lost: it opens an HTTP/2 connection to each
peer's gRPC server, which answers at once with its settings when its process runs. A
dead peer refuses the connection ("unreachable"); a stopped or frozen one lets the
kernel accept it but never answers ("does not answer").
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import socket
from typing import Mapping, Sequence

import tensorflow as tf

from estimator_dist.errors import EnvironmentFault

PROBE_SECONDS = 3.0
_MAX_PROBES = 16  # Peers asked at once.
# A client connection preface and an empty SETTINGS frame (RFC 7540, 3.5 and 6.5).
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS_FRAME_TYPE = 4


class PeerLostError(EnvironmentFault, RuntimeError):
    """A multi-worker training session failed and cannot recover in this process (the
    CLI prints it as one line and exits 1)."""


def peer_state(host: str, port: int | str, timeout: float = PROBE_SECONDS) -> str:
    """"answers", "unreachable" or "does not answer": how a gRPC server at host:port
    reacts to an HTTP/2 connection within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, int(port)), timeout=timeout) as sock:
            sock.sendall(_HTTP2_PREFACE)
            header = sock.recv(9)
    except socket.timeout:
        return "does not answer"
    except OSError:
        return "unreachable"
    if len(header) > 3 and header[3] == _SETTINGS_FRAME_TYPE:
        return "answers"
    return "does not answer"


def _collective_tasks(spec: Mapping[str, Sequence[str]]) -> list[tuple[str, str, str]]:
    """[(name, host, port)] of the chief and worker tasks of cluster ``spec``."""
    tasks = []
    for task_type in ("chief", "worker"):
        for index, address in enumerate(spec.get(task_type, ())):
            host, _, port = address.rpartition(":")
            tasks.append((f"{task_type} {index}", host.strip("[]"), port))
    return tasks


def silent_peers(spec: Mapping[str, Sequence[str]], me: str) -> list[tuple[str, str, str, str]]:
    """[(name, host, port, state)] of the chief and worker tasks of cluster ``spec`` other
    than ``me`` (e.g. "worker 0") whose gRPC server does not answer."""
    peers = [peer for peer in _collective_tasks(spec) if peer[0] != me]
    if not peers:
        return []
    with concurrent.futures.ThreadPoolExecutor(min(_MAX_PROBES, len(peers))) as pool:
        states = list(pool.map(lambda peer: peer_state(peer[1], peer[2]), peers))
    return [(*peer, state) for peer, state in zip(peers, states) if state != "answers"]


def describe(silent: Sequence[tuple[str, str, str, str]]) -> str:
    """"worker 1 at 127.0.0.1:2223 is unreachable (...)" for ``silent_peers``' result."""
    why = {"unreachable": "is unreachable (its process is gone or its host is down)",
           "does not answer": "does not answer (its process is stopped, frozen or "
                              "overloaded)"}
    return "; ".join(f"{name} at {host}:{port} {why[state]}" for name, host, port, state in silent)


def _lost_peers() -> str:
    """Which peers of this task's ``TF_CONFIG`` cluster are lost, in words, or ""."""
    try:  # Every cluster run writes its resolved cluster there (cluster_sources).
        config = json.loads(os.environ.get("TF_CONFIG") or "{}")
        spec, me = config["cluster"], f"{config['task']['type']} {config['task']['index']}"
    except (ValueError, KeyError, TypeError):
        return ""
    silent = silent_peers(spec, me)
    return f": {describe(silent)}" if silent else ""


class PeerFailureHook(tf.estimator.SessionRunHook):
    """Raises ``PeerLostError`` when the training session is created a second time.

    Pass it in ``tf.estimator.TrainSpec(..., hooks=[PeerFailureHook()])`` (or
    ``estimator.train(..., hooks=...)``) under strategy "multi_worker".
    """

    def __init__(self) -> None:
        self._sessions = 0

    def after_create_session(self, session: tf.compat.v1.Session,
                             coord: tf.train.Coordinator) -> None:
        del session, coord  # Only the count matters.
        self._sessions += 1
        if self._sessions > 1:
            raise PeerLostError(
                f"multi-worker training lost a peer{_lost_peers()} (its collectives failed "
                "and the session had to be re-created); restart every task from the last "
                "checkpoint.")
