"""The launcher keeps a local cluster off the network.

TensorFlow's gRPC server listens on every interface whatever TF_CONFIG says, and takes
unauthenticated sessions. Each test launches a task that starts a real
``tf.distribute.Server`` from its TF_CONFIG inside a network namespace the test makes
(a veth address beside loopback), then connects to that port from the veth address:
isolated (the default) the connection fails, while the task itself
reaches its server on 127.0.0.1; with ``--allow-network-exposure`` the same connection
succeeds, so the check can fail.
"""
import contextlib
import os
import shutil
import signal
import subprocess
import sys

import pytest

from estimator_dist.commands import launch
from estimator_dist.supervisor.tasks import free_ports
from estimator_dist.supervisor import isolation
from tests.support import REPO_ROOT


# Starts the task's gRPC server, checks it answers on 127.0.0.1, and prints its port and
# the local addresses the kernel lists for it in /proc/net/tcp{,6}.
_SERVER_TASK = """
import json, os, socket, time
port = int(json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"][0].rsplit(":", 1)[1])
if os.environ.get("PLAIN_SOCKET"):
    server = socket.create_server(("0.0.0.0", port))
else:
    import tensorflow as tf
    server = tf.distribute.Server(tf.train.ClusterSpec({"worker": [f"localhost:{port}"]}),
                                  job_name="worker", task_index=0)
socket.create_connection(("127.0.0.1", port), timeout=10).close()
listen = []
for name in ("tcp", "tcp6"):
    with open(f"/proc/net/{name}") as table:
        for line in list(table)[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                listen.append(local.rsplit(":", 1)[0])
print("SERVING", port, ",".join(listen), flush=True)
time.sleep(300)
"""
_LAUNCH_SECONDS = 120


@pytest.fixture(scope="module")
def outside():
    """(command prefix, address): where to run the launcher and the probe, and an address
    there other than loopback: a network namespace made here with a veth pair (needs
    root), so the probe's traffic never leaves namespaces this test made."""
    name = f"estimator-dist-test-{os.getpid()}"
    prefix = ["ip", "netns", "exec", name]
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for command in (["ip", "link", "add", "probe0", "type", "veth", "peer", "probe1"],
                        ["ip", "addr", "add", "10.254.0.1/24", "dev", "probe0"],
                        ["ip", "link", "set", "probe0", "up"],
                        ["ip", "link", "set", "probe1", "up"], ["ip", "link", "set", "lo", "up"]):
            subprocess.run(prefix + command, check=True)
        yield prefix, "10.254.0.1"
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


@contextlib.contextmanager
def _launched_server(prefix, *flags, env=None, task_python=sys.executable):
    """Launches one worker serving on its TF_CONFIG port; yields (port, listen addresses)."""
    process = subprocess.Popen(
        prefix + [sys.executable, "-m", "estimator_dist.launch", "--workers", "1",
                  "--timeout", str(_LAUNCH_SECONDS), *flags, "--", task_python, "-c",
                  _SERVER_TASK],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": REPO_ROOT, **(env or {})})
    try:
        for line in process.stdout:
            if "SERVING" in line:
                _, port, listen = line.split("SERVING", 1)[1].split(" ")
                yield int(port), listen.strip().split(",")
                break
        else:
            pytest.fail(f"the task never served: {process.stderr.read()}")
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _host_listening_ports():
    """The TCP ports listening in this process's network namespace (the host's)."""
    ports = set()
    for name in ("tcp", "tcp6"):
        with open(f"/proc/net/{name}", encoding="ascii") as table:
            for line in list(table)[1:]:
                local, state = line.split()[1], line.split()[3]
                if state == "0A":
                    ports.add(int(local.rsplit(":", 1)[1], 16))
    return ports


@pytest.mark.multi_process
@pytest.mark.timeout(90)
@pytest.mark.parametrize("exposure", [False, True], ids=["default", "allow_exposure"])
def test_launch_loopback_node_listens_on_host_only_when_exposure_allowed(exposure):
    """A one-node cluster on 127.0.0.1 runs in a private network namespace, as the local
    launcher does: its port (a plain socket on every interface, as TensorFlow's server
    listens) is not among the host's listening sockets unless --allow-network-exposure
    puts the task in the host's namespace."""
    base = free_ports(1)[0]
    flags = ["--nodes", "1", "--node-rank", "0", "--hosts", "127.0.0.1", "--base-port",
             str(base)] + ([isolation.EXPOSURE_FLAG] if exposure else [])
    with _launched_server([], *flags, env={"PLAIN_SOCKET": "1"}) as (port, listen):
        assert port == base and listen
        assert (port in _host_listening_ports()) is exposure


def _connects(prefix, address, port):
    """Whether a TCP connection to address:port succeeds from where ``prefix`` runs."""
    probe = (f"import socket\ntry:\n    socket.create_connection(({address!r}, {port}), "
             f"timeout=5).close(); print('connected')\nexcept OSError as e:\n    print(e)")
    result = subprocess.run(prefix + [sys.executable, "-c", probe], capture_output=True,
                            text=True, timeout=60, check=True)
    return result.stdout.strip() == "connected"


@pytest.mark.slow
@pytest.mark.multi_process
def test_tf_server_listens_on_all_interfaces(outside):
    prefix, _ = outside
    with _launched_server(prefix) as (_, listen):
        assert listen and all(set(address) == {"0"} for address in listen), listen


@pytest.mark.slow
@pytest.mark.multi_process
def test_launch_task_unreachable_from_other_address(outside):
    prefix, address = outside
    with _launched_server(prefix) as (port, _):
        assert not _connects(prefix, address, port)


@pytest.mark.slow
@pytest.mark.multi_process
def test_launch_allow_network_exposure_task_reachable(outside):
    prefix, address = outside
    with _launched_server(prefix, "--allow-network-exposure") as (port, _):
        assert _connects(prefix, address, port)


_SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not _SYSTEM_PYTHON,
                    reason="switching to an unprivileged user needs root, setpriv and a "
                           "python3 that user can run")
def test_launch_without_root_isolates_in_user_namespace(outside):
    """As user nobody the launcher needs a user namespace too; the task (plain Python, a
    socket on 0.0.0.0) reaches its port on 127.0.0.1 but the host's address does not."""
    prefix, address = outside
    nobody = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    with _launched_server(prefix + nobody, env={"PLAIN_SOCKET": "1"},
                          task_python=_SYSTEM_PYTHON) as (port, _):
        assert not _connects(prefix, address, port)


def _refuse_unshare(flags):
    raise OSError(1, "Operation not permitted")


@pytest.mark.parametrize("platform, unshare", [("linux", _refuse_unshare),
                                               ("darwin", None)], ids=["no_permission",
                                                                       "not_linux"])
def test_launch_without_isolation_refuses_in_one_line(monkeypatch, capsys, platform, unshare):
    monkeypatch.setattr(isolation.sys, "platform", platform)
    if unshare:
        monkeypatch.setattr(isolation, "_unshare", unshare)
    code = launch.main(["--workers", "1", "--", sys.executable, "-c", "print('ran')"])
    captured = capsys.readouterr()
    assert code == 2 and "ran" not in captured.out
    assert captured.err.splitlines() == [captured.err.strip()]
    assert "must run in a private network namespace" in captured.err
    assert "pass --allow-network-exposure to run it without one" in captured.err
