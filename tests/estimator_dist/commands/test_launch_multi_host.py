"""The multi-host launcher: one launcher per node derives each node's TF_CONFIG."""
import concurrent.futures
import dataclasses
import json
import os
import re
import socket
import subprocess
import sys

import pytest

from estimator_dist.commands import launch
from estimator_dist.supervisor import isolation, spec
from estimator_dist.distribute import cluster
from tests.support import REPO_ROOT

_PRINT_TASK = ("import json, os; c = json.loads(os.environ['TF_CONFIG']); "
               "print('TASK', json.dumps(c))")


def _free_port_range(count):
    """A base port whose next ``count`` ports were all free on 127.0.0.1 a moment ago."""
    for base in range(20000, 60000, 97):
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError("no free port range")


def _launch_nodes(nodes, flags, command, timeout):
    """Runs one launcher per node rank at once; returns their CompletedProcesses."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}

    def run(rank):
        return subprocess.run(
            [sys.executable, "-m", "estimator_dist.launch", "--nodes", str(nodes),
             "--node-rank", str(rank), *flags, "--", *command],
            capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO_ROOT)

    with concurrent.futures.ThreadPoolExecutor(nodes) as pool:
        return list(pool.map(run, range(nodes)))


def _tasks(stdout):
    return [json.loads(line.split("TASK ", 1)[1]) for line in stdout.splitlines()
            if "TASK " in line]


def test_multi_host_cluster_ports_per_node():
    spec, tasks, nodes = cluster.multi_host_cluster(["a", "b"], 3000, 2, evaluator=True)
    assert spec == {"worker": ["a:3000", "a:3001", "b:3002", "b:3003"]}
    assert list(zip(tasks, nodes)) == [(("worker", 0), 0), (("worker", 1), 0),
                                       (("worker", 2), 1), (("worker", 3), 1),
                                       (("evaluator", 0), 0)]


def test_multi_host_cluster_with_ps_has_chief_on_node_zero():
    spec, tasks, nodes = cluster.multi_host_cluster(["a", "b"], 3000, 1, ps_per_node=1)
    assert spec == {"chief": ["a:3000"], "worker": ["b:3002"], "ps": ["a:3001", "b:3003"]}
    assert list(zip(tasks, nodes)) == [(("chief", 0), 0), (("worker", 0), 1),
                                       (("ps", 0), 0), (("ps", 1), 1)]


@pytest.mark.multi_process
def test_launch_nodes_agree_on_one_cluster():
    flags = ["--hosts", "hostA,hostB", "--workers", "1", "--evaluator", "--base-port", "4000"]
    results = _launch_nodes(2, flags, [sys.executable, "-c", _PRINT_TASK], timeout=120)
    assert all(r.returncode == 0 for r in results), [r.stderr for r in results]
    node0, node1 = (_tasks(r.stdout) for r in results)
    assert sorted(c["task"]["type"] for c in node0) == ["evaluator", "worker"]
    assert [c["task"] for c in node1] == [{"type": "worker", "index": 1}]
    assert {json.dumps(c["cluster"]) for c in node0 + node1} == {
        json.dumps({"worker": ["hostA:4000", "hostB:4001"]})}
    for rank, result in enumerate(results):
        assert result.stderr.splitlines() == [
            f"launch: node {rank}'s tasks listen on every interface of this host (port "
            f"{4000 + rank}) and take unauthenticated connections: keep the nodes on a private "
            "network or behind a firewall (docs/security.md)"]


@pytest.mark.multi_process
@pytest.mark.parametrize("flags, message", [
    (["--nodes", "2", "--node-rank", "0", "--workers", "1"],
     r"--nodes, --node-rank and --hosts go together"),
    (["--nodes", "2", "--node-rank", "0", "--hosts", "a", "--workers", "1"],
     r"--hosts must name 2 hosts .*Received: --hosts a"),
    (["--nodes", "2", "--node-rank", "2", "--hosts", "a,b", "--workers", "1"],
     r"--node-rank must be in \[0, 2\)\. Received: --node-rank 2"),
    (["--nodes", "2", "--node-rank", "0", "--hosts", "a,b", "--workers", "1", "--base-port",
      "65535"], r"--base-port leaves no room .*Received: --base-port 65535"),
])
def test_launch_multi_host_bad_flags_one_line_exit_2(flags, message):
    result = subprocess.run([sys.executable, "-m", "estimator_dist.launch", *flags, "--", "true"],
                            capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert re.search(message, result.stderr)


@pytest.mark.slow
@pytest.mark.multi_process
def test_launch_two_nodes_train_dense_multi_worker_to_completion(model_dir):
    base = _free_port_range(2)
    flags = ["--hosts", "127.0.0.1,127.0.0.1", "--workers", "1", "--base-port", str(base),
             "--timeout", "400", "--allow-network-exposure"]
    command = [sys.executable, "-m", "estimator_dist.train", "--strategy", "multi_worker",
               "--model", "dense", "--max-steps", "40", "--model-dir", model_dir,
               "--no-export", "--rendezvous-timeout", "120"]
    results = _launch_nodes(2, flags, command, timeout=480)
    for result in results:
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert re.search(r"\[worker 0\] training +40 steps", results[0].stdout)
    assert "[worker 1]" in results[1].stdout and "[worker 0]" not in results[1].stdout
    assert os.path.exists(os.path.join(model_dir, "model.ckpt-40.index"))


def test_launch_spec_holds_flags_checked_and_leaves_args_as_parsed():
    args = launch.launch_parser().parse_args(
        ["--nodes", "2", "--node-rank", "1", "--hosts", " host-a, host-b", "--workers", "2",
         "--ps", "1", "--timeout", "60", "--", "python", "train.py"])
    launch_spec = launch.launch_spec(args)
    assert launch_spec == spec.LaunchSpec(
        ("python", "train.py"), 2, ps=1, timeout=60,
        multi_host=spec.MultiHost(2, 1, ("host-a", "host-b"), 2222))
    assert args.hosts == " host-a, host-b" and args.command == ["--", "python", "train.py"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        launch_spec.workers = 3


def test_launch_spec_without_nodes_is_a_local_cluster():
    args = launch.launch_parser().parse_args(
        ["--workers", "1", "--evaluator", "--max-restarts", "2", "--allow-network-exposure",
         "--", "true"])
    assert launch.launch_spec(args) == spec.LaunchSpec(
        ("true",), 1, evaluator=True, max_restarts=2, allow_network_exposure=True)


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.8.9.10", True),
                                            ("::1", True), ("[::1]", True),
                                            ("localhost", True), ("LocalHost", True),
                                            ("10.0.0.5", False), ("host-a", False),
                                            ("localhost.example.com", False)])
def test_is_loopback_by_address_or_localhost_without_dns(host, loopback):
    assert isolation.is_loopback(host) is loopback


@pytest.mark.multi_process
def test_launch_nodes_on_loopback_without_exposure_refused_in_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "estimator_dist.launch", "--nodes", "2", "--node-rank", "0",
         "--hosts", "127.0.0.1,localhost", "--workers", "1", "--", "true"],
        capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert re.search(r"--hosts on loopback only need --allow-network-exposure with --nodes 2: "
                     r".* Received: --hosts 127\.0\.0\.1,localhost", result.stderr)
