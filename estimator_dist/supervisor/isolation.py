"""Network isolation of a local cluster: its tasks reachable from loopback only.

TensorFlow's gRPC server (``tf.distribute.Server``, which every task of a cluster starts)
listens on all interfaces, ``*:PORT``, whatever host ``TF_CONFIG`` names, and it has no
bind-address option and no authentication: anyone who can reach the port can run ops on
the task, e.g. read its files (docs/security.md). ``isolate_network`` moves the calling
process into a new, private Linux network namespace holding only a loopback interface,
which it brings up; processes started afterwards inherit it. So tasks on 127.0.0.1 reach
each other, and nothing outside the namespace can connect to them (nor can they reach
the network).

As root it unshares the network namespace alone; otherwise a user namespace too, in which
the caller keeps its own uid and gid. It must run before the process starts threads.

``isolate_launch`` decides for a launch: isolated unless ``--allow-network-exposure``; a
node of a multi-host cluster on real hosts runs in the host's namespace (the nodes must
reach each other), and says so.
"""
from __future__ import annotations

import ctypes
import fcntl
import ipaddress
import os
import socket
import struct
import sys
from typing import TYPE_CHECKING

from estimator_dist.errors import UsageError

if TYPE_CHECKING:
    from estimator_dist.supervisor.spec import LaunchSpec

_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_IFREQ = "16sH22x"  # struct ifreq: the interface name, then ifr_flags in a 24-byte union.
EXPOSURE_FLAG = "--allow-network-exposure"


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback: ``localhost`` or a loopback address
    (``127.0.0.0/8``, ``::1``). Other names count as real hosts: they are not resolved,
    which could wait on DNS."""
    if host.lower() == "localhost" or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _unshare(flags: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(flags) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def _map_own_ids(uid: int, gid: int) -> None:
    """Inside a new user namespace: keep the caller's uid and gid (and no other)."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w", encoding="ascii") as file:
            file.write(text)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack(_IFREQ, b"lo", 0)
        _, flags = struct.unpack(_IFREQ, fcntl.ioctl(sock, _SIOCGIFFLAGS, request))
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


def _refusal(reason: str) -> UsageError:
    return UsageError(
        f"a local cluster must run in a private network namespace, since TensorFlow's gRPC "
        f"server accepts unauthenticated connections on every interface (docs/security.md); "
        f"pass {EXPOSURE_FLAG} to run it without one. Received: {reason}")


def isolate_network() -> None:
    """Moves this process (and every process it starts afterwards) into a new network
    namespace where only loopback exists and is up.

    Raises:
      UsageError: the platform is not Linux, or the kernel refused a new namespace
        (no permission, or user namespaces disabled).
    """
    if not sys.platform.startswith("linux"):
        raise _refusal(f"platform {sys.platform!r} has no network namespaces")
    uid, gid = os.getuid(), os.getgid()
    attempts = [_CLONE_NEWNET, _CLONE_NEWUSER | _CLONE_NEWNET] if os.geteuid() == 0 else [
        _CLONE_NEWUSER | _CLONE_NEWNET]
    for flags in attempts:
        try:
            _unshare(flags)
        except OSError as error:
            failure = error
            continue
        try:
            if flags & _CLONE_NEWUSER:
                _map_own_ids(uid, gid)
            _loopback_up()
        except OSError as error:
            raise _refusal(f"setting up the namespace failed ({error.strerror})") from None
        return
    raise _refusal(f"unshare of a network namespace failed ({failure.strerror})")


def isolate_launch(spec: LaunchSpec) -> None:
    """Closes a launch's cluster to the network unless the user allowed exposure, or says
    where it listens when its nodes are real hosts (which must reach each other)."""
    node = spec.multi_host
    if spec.allow_network_exposure:
        return
    if not node:
        isolate_network()
        return
    if not all(is_loopback(host) for host in node.hosts):
        first = node.base_port + node.node_rank * (spec.workers + spec.ps)
        last = first + spec.workers + spec.ps - 1
        ports = f"port {first}" if first == last else f"ports {first}-{last}"
        print(f"launch: node {node.node_rank}'s tasks listen on every interface of this host "
              f"({ports}) and take unauthenticated connections: keep the nodes on a private "
              "network or behind a firewall (docs/security.md)", file=sys.stderr, flush=True)
        return
    if node.nodes > 1:
        raise UsageError(
            f"--hosts on loopback only need {EXPOSURE_FLAG} with --nodes "
            f"{node.nodes}: every node is this machine, and each launcher's private network "
            "namespace would hide its tasks from the others (the flag runs them in the "
            "host's, their ports open on every interface, docs/security.md; one launcher "
            f"without --nodes needs no flag). Received: --hosts {','.join(node.hosts)}")
    isolate_network()
