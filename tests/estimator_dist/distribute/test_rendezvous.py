"""The rendezvous: a cluster that cannot form fails within a bound, naming the task."""
import codecs
import io
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

import estimator_dist
from estimator_dist.supervisor.tasks import free_ports
from estimator_dist.distribute import cluster, rendezvous
from estimator_dist.errors import TaskEnd
from tests.support import REPO_ROOT, run_python, run_workers

_TRAIN = ["-m", "estimator_dist.train", "--strategy", "multi_worker", "--no-export"]


def _config(addresses, index=0):
    return cluster.TFConfig({"worker": list(addresses)}, "worker", index)


def _tf_config_env(addresses, index=0):
    return {"TF_CONFIG": _config(addresses, index).to_json()}


def test_preflight_duplicate_address_names_both_tasks():
    with pytest.raises(ValueError, match=r"worker 0 and worker 1 both have 127\.0\.0\.1:2000"):
        rendezvous.preflight(_config(["127.0.0.1:2000", "localhost:2000"]))


def test_preflight_unresolvable_host_named():
    with pytest.raises(ValueError, match=r"worker 1 must have a resolvable host\. "
                                         r"Received: no-such-host\.invalid:2001"):
        rendezvous.preflight(_config(["127.0.0.1:2000", "no-such-host.invalid:2001"]))


def test_preflight_bad_port_named():
    with pytest.raises(ValueError, match=r"worker 1 must end in a port .*Received: port 'http'"):
        rendezvous.preflight(_config(["127.0.0.1:2000", "127.0.0.1:http"]))


def test_wait_for_peers_own_port_taken_refused():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = _config([f"127.0.0.1:{port}", f"127.0.0.1:{free_ports(1)[0]}"])
        with pytest.raises(ValueError, match=rf"TF_CONFIG must give this task a port free "
                                             rf"on this host.*127\.0\.0\.1:{port}"):
            rendezvous.wait_for_peers(config, timeout=5)


def test_wait_for_peers_returns_once_peer_answers():
    with socket.socket() as peer:
        peer.bind(("127.0.0.1", 0))
        peer.listen()
        config = _config([f"127.0.0.1:{free_ports(1)[0]}",
                          f"127.0.0.1:{peer.getsockname()[1]}"])
        start = time.monotonic()
        rendezvous.wait_for_peers(config, timeout=30)
    assert time.monotonic() - start < 10


def test_form_cluster_again_in_a_process_that_joined_skips_the_wait(monkeypatch):
    """A second config or Estimator in a worker process: its own server holds the port
    now, and TensorFlow reuses it, so the rendezvous does not run again."""
    with socket.socket() as peer:
        peer.bind(("127.0.0.1", 0))
        peer.listen()
        config = _config([f"127.0.0.1:{free_ports(1)[0]}",
                          f"127.0.0.1:{peer.getsockname()[1]}"])
        monkeypatch.setattr(rendezvous, "_JOINED", {})
        assert rendezvous.form_cluster(lambda: "first", 30, tf_config=config,
                                       stream=io.StringIO()) == "first"
    # The peer is gone: a rendezvous would now wait for it and fail.
    assert rendezvous.form_cluster(lambda: "second", 1, tf_config=config) == "second"


def test_form_cluster_counts_later_builds_for_the_rebuilt_callback(monkeypatch):
    """Only a later build calls ``rebuilt``, with how many strategies the process built."""
    monkeypatch.setattr(rendezvous, "_JOINED", {})
    monkeypatch.setattr(rendezvous, "wait_for_peers", lambda *args, **kwargs: time.monotonic())
    config, calls = _config(["127.0.0.1:1", "127.0.0.1:2"]), []
    for build in ("first", "second", "third"):
        assert rendezvous.form_cluster(lambda b=build: b, 7, tf_config=config,
                                       stream=io.StringIO(),
                                       rebuilt=lambda *args: calls.append(args)) == build
    assert calls == [(2, 7), (3, 7)]


@pytest.mark.slow
def test_wait_for_peers_missing_peer_fails_in_time_with_progress(monkeypatch):
    monkeypatch.setattr(rendezvous, "PROGRESS_SECONDS", 1)
    own, missing = free_ports(2)
    stream = io.StringIO()
    start = time.monotonic()
    with pytest.raises(ValueError, match=rf"could not reach worker 1 at 127\.0\.0\.1:{missing} "
                                         r"within the rendezvous timeout of 3 s"):
        rendezvous.wait_for_peers(_config([f"127.0.0.1:{own}", f"127.0.0.1:{missing}"]),
                                  timeout=3, stream=stream)
    assert time.monotonic() - start < 8
    assert f"rendezvous: waiting for worker 1 at 127.0.0.1:{missing}, " in stream.getvalue()


@pytest.mark.slow
@pytest.mark.multi_process
def test_train_cli_missing_worker_exits_within_timeout_naming_it(model_dir):
    own, missing = free_ports(2)
    env = _tf_config_env([f"127.0.0.1:{own}", f"127.0.0.1:{missing}"])
    start = time.monotonic()
    result = run_python([*_TRAIN, "--model-dir", model_dir, "--rendezvous-timeout", "15"],
                        env=env, timeout=180)
    elapsed = time.monotonic() - start
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert re.search(rf"error: rendezvous: could not reach worker 1 at 127\.0\.0\.1:{missing} "
                     r"within the rendezvous timeout of 15 s", last)
    assert "rendezvous: waiting for worker 1" in result.stderr
    assert elapsed < 15 + 60  # The bound, plus importing TensorFlow on a loaded machine.


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.parametrize("addresses, message", [
    (["127.0.0.1:{0}", "127.0.0.1:{0}"], r"worker 0 and worker 1 both have 127\.0\.0\.1:\d+"),
    (["127.0.0.1:{0}", "no-such-host.invalid:{0}"], r"worker 1 must have a resolvable host"),
])
def test_train_cli_unformable_cluster_one_line_at_once(model_dir, addresses, message):
    port = free_ports(1)[0]
    env = _tf_config_env([a.format(port) for a in addresses])
    result = run_python([*_TRAIN, "--model-dir", model_dir, "--rendezvous-timeout", "600"],
                        env=env, timeout=120)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert re.search(message, result.stderr)


@pytest.mark.slow
@pytest.mark.multi_process
def test_train_cli_sigterm_ends_waiting_worker(model_dir):
    own, missing = free_ports(2)
    env = dict(os.environ, **_tf_config_env([f"127.0.0.1:{own}", f"127.0.0.1:{missing}"]))
    process = subprocess.Popen(
        [sys.executable, *_TRAIN, "--model-dir", model_dir, "--rendezvous-timeout", "600"],
        env=env, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        line = ""
        while "rendezvous: waiting" not in line and time.monotonic() < deadline:
            line = process.stderr.readline()
        assert "rendezvous: waiting for worker 1" in line
        process.send_signal(signal.SIGTERM)
        start = time.monotonic()
        code = process.wait(timeout=30)
        stopped = time.monotonic() - start
        rest = process.stderr.read()
    finally:
        process.kill()
        process.wait()
    assert code == 128 + signal.SIGTERM
    assert stopped < 15  # Within a Kubernetes grace period, with room for a loaded machine.
    assert rest.strip().splitlines()[-1].startswith(
        "python -m estimator_dist.train: rendezvous: stopped by SIGTERM while waiting for "
        "worker 1")


@pytest.mark.slow
@pytest.mark.multi_process
def test_make_run_config_rendezvous_timeout_in_legacy_graph_mode(tmp_path):
    """Under disable_v2_behavior the strategy starts no server itself; the probe still bounds
    the wait."""
    own, missing = free_ports(2)
    script = tmp_path / "job.py"
    script.write_text(
        "import tensorflow as tf\n"
        "tf.compat.v1.disable_v2_behavior()\n"
        "import estimator_dist\n"
        "estimator_dist.make_run_config('multi_worker', rendezvous_timeout=5)\n")
    result = run_python([str(script)], timeout=120,
                        env=_tf_config_env([f"127.0.0.1:{own}", f"127.0.0.1:{missing}"]))
    assert result.returncode != 0
    assert f"could not reach worker 1 at 127.0.0.1:{missing}" in result.stderr


def test_make_run_config_unreachable_cluster_raises_in_time_to_a_library_caller(monkeypatch):
    """A library caller gets the exception, within the bound, and its process runs on."""
    own, missing = free_ports(2)
    monkeypatch.setenv("TF_CONFIG", _tf_config_env([f"127.0.0.1:{own}",
                                                    f"127.0.0.1:{missing}"])["TF_CONFIG"])
    start = time.monotonic()
    with pytest.raises(rendezvous.RendezvousError, match=rf"could not reach worker 1 at "
                                                         rf"127\.0\.0\.1:{missing}"):
        estimator_dist.make_run_config("multi_worker", rendezvous_timeout=2)
    assert time.monotonic() - start < 8


def test_wait_for_peers_signal_raises_task_end_with_its_exit_code():
    """SIGINT while waiting: a TaskEnd for the caller (the CLI exits 130 with its line),
    not SystemExit."""
    own, missing = free_ports(2)
    timer = threading.Timer(1.0, signal.pthread_kill,
                            (threading.main_thread().ident, signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(TaskEnd, match=rf"^rendezvous: stopped by SIGINT while waiting for "
                                          rf"worker 1 at 127\.0\.0\.1:{missing}$") as raised:
            rendezvous.wait_for_peers(_config([f"127.0.0.1:{own}", f"127.0.0.1:{missing}"]),
                                      timeout=30, stream=io.StringIO())
    finally:
        timer.cancel()
    assert raised.value.exit_code == 128 + signal.SIGINT
    assert not isinstance(raised.value, SystemExit)


_STOPPING_CODEC = "estimator_dist_tests_signal_inside"


def _stopping_codec(name):
    """A codec whose encoding is interrupted by SIGTERM (its handler runs inside it)."""
    def encode(text, errors="strict"):
        signal.raise_signal(signal.SIGTERM)
        return text.encode("ascii", errors), len(text)

    return codecs.CodecInfo(encode, None, name=name) if name == _STOPPING_CODEC else None


codecs.register(_stopping_codec)


def test_wait_for_peers_signal_inside_a_codec_keeps_its_name_and_exit_code(monkeypatch):
    """SIGTERM can land inside a codec: the connect encodes the peer's host with "idna", and
    Python 3.11 rewrote the message of what the handler raised there ("encoding with 'idna'
    codec failed (...)"), which the stop read its signal from (AttributeError, exit 1)."""
    own, missing = free_ports(2)

    def connect(address, timeout=None):
        del timeout
        address[0].encode(_STOPPING_CODEC)

    monkeypatch.setattr(rendezvous.socket, "create_connection", connect)
    with pytest.raises(TaskEnd, match=r"^rendezvous: stopped by SIGTERM while waiting for "
                                      r"worker 1 at ") as raised:
        rendezvous.wait_for_peers(_config([f"127.0.0.1:{own}", f"127.0.0.1:{missing}"]),
                                  timeout=30, stream=io.StringIO())
    assert raised.value.exit_code == 128 + signal.SIGTERM


# A program of the user's that waits for its peers and catches nothing: SIGTERM after 2 s.
_WAITS_UNCAUGHT = """
import os, signal, sys, threading
from estimator_dist.distribute import cluster, rendezvous
addresses = [f"127.0.0.1:{port}" for port in sys.argv[1:]]
threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
rendezvous.wait_for_peers(cluster.TFConfig({"worker": addresses}, "worker", 0), timeout=60)
"""


@pytest.mark.multi_process
@pytest.mark.timeout(60)
def test_uncaught_task_end_in_a_user_s_program_is_one_line_and_its_exit_code():
    """Stopped while it waits (as the launcher stops a task whose peer failed), a program
    that calls the library itself ends as the CLI would: no traceback."""
    own, missing = free_ports(2)
    result = run_python(["-c", _WAITS_UNCAUGHT, str(own), str(missing)], timeout=40,
                        cwd=REPO_ROOT, env={"PYTHONPATH": REPO_ROOT})
    assert (result.returncode, result.stderr) == (
        128 + signal.SIGTERM, f"rendezvous: stopped by SIGTERM while waiting for worker 1 at "
                              f"127.0.0.1:{missing}\n")


def test_make_run_config_rendezvous_timeout_outside_cluster_strategies_rejected():
    with pytest.raises(ValueError, match=r"rendezvous_timeout applies to strategy "
                                         r"'multi_worker' or 'parameter_server' only"):
        estimator_dist.make_run_config("mirrored", rendezvous_timeout=10)


@pytest.mark.slow
@pytest.mark.multi_process
def test_train_cli_parameter_server_missing_ps_exits_naming_it(model_dir):
    chief, ps = free_ports(2)
    env = {"TF_CONFIG": cluster.TFConfig(
        {"chief": [f"127.0.0.1:{chief}"], "ps": [f"127.0.0.1:{ps}"]}, "chief", 0).to_json()}
    result = run_python(["-m", "estimator_dist.train", "--strategy", "parameter_server",
                         "--no-export", "--model-dir", model_dir, "--rendezvous-timeout", "5"],
                        env=env, timeout=180)
    assert result.returncode == 2, result.stderr
    assert f"could not reach ps 0 at 127.0.0.1:{ps}" in result.stderr.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.multi_process
def test_train_cli_peer_port_held_by_other_program_exits_within_bound(model_dir):
    """A peer address that answers TCP but is not TensorFlow passes the probe; the join
    then blocks inside the runtime, and the watchdog ends the task."""
    own = free_ports(1)[0]
    with socket.socket() as impostor:
        impostor.bind(("127.0.0.1", 0))
        impostor.listen()
        env = _tf_config_env([f"127.0.0.1:{own}", f"127.0.0.1:{impostor.getsockname()[1]}"])
        start = time.monotonic()
        result = run_python([*_TRAIN, "--model-dir", model_dir, "--rendezvous-timeout", "5"],
                            env=env, timeout=240)
        elapsed = time.monotonic() - start
    assert result.returncode == 1
    assert ("joining TensorFlow's cluster (this task exits with code 1 if it has not formed "
            f"in {rendezvous.MIN_JOIN_SECONDS} s)") in result.stderr
    assert elapsed < rendezvous.MIN_JOIN_SECONDS + 90  # The bound, plus importing TF.


# A second strategy in TF2 behaviour (tests/programs/second_strategy_job.py): worker 0 is
# this many seconds late for it, long enough for worker 1 to build its own and start its
# collectives first.
_LATE_SECONDS = "10"


def _second_strategy(tmp_path, strategy, *args):
    command = [sys.executable, "-m", "tests.programs.second_strategy_job", str(tmp_path),
               strategy, *args]
    return run_workers([command] * 2, free_ports(2), 240)


def _outcome(stdout):
    return [line for line in stdout.splitlines() if line.startswith(("RESULT", "ERROR"))]


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(300)
def test_tf_second_strategy_drops_the_collectives_a_faster_peer_started(tmp_path):
    """TensorFlow's fact behind the barrier: in TF2 behaviour a second
    MultiWorkerMirroredStrategy re-creates the task's collective executors, and a peer's
    collective that reached the old ones fails."""
    (_, _, first), (_, stderr, late) = _second_strategy(tmp_path, "plain", _LATE_SECONDS)
    assert first != 0 and late != 0
    assert "Delete called on non-empty BufRendezvous" in stderr, stderr[-3000:]


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(300)
def test_second_make_run_config_waits_for_a_late_worker_0(tmp_path):
    """Two Estimators one after the other, each with its own config: worker 1 waits at the
    barrier until worker 0 has built its second strategy too, and both train it. Worker 0,
    the chief, evaluates its own final checkpoint; worker 1 evaluates the newest checkpoint
    the chief has saved by then (docs/legacy.md), which may be any step up to the last."""
    chief, other = _second_strategy(tmp_path, "package", _LATE_SECONDS, "120")
    for _, stderr, code in (chief, other):
        assert code == 0, stderr[-3000:]
    assert _outcome(chief[0]) == ['RESULT {"global_step": 10}']
    [line] = _outcome(other[0])
    assert 0 <= json.loads(line.removeprefix("RESULT "))["global_step"] <= 10, line


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(300)
def test_second_make_run_config_names_the_wait_a_worker_outlasted(tmp_path):
    """Worker 0 builds its second strategy after worker 1's rendezvous timeout: worker 1's
    config raises one line naming the rule, the build and the timeout."""
    _, (stdout, _, code) = _second_strategy(tmp_path, "package", "15", "3")
    assert code != 0
    [line] = _outcome(stdout)
    assert line.startswith(
        "ERROR RendezvousError: rendezvous: every chief and worker must build a multi_worker "
        "strategy as often as the others (in TF2 behaviour each build re-creates the "
        "collective executors), but not every task built its strategy number 2 within 3 s. "
        "Received: DeadlineExceededError (Barrier timed out."), line
