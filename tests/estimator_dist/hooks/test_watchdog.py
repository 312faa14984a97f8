"""The stall watchdog and the peer probe: a lost peer ends a multi-worker task within
``collective_timeout``, with one line naming the peer, and no thread per collective."""
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from estimator_dist import checkpoint_step, process_exit
from estimator_dist.supervisor.tasks import free_ports
from estimator_dist.hooks import peer_failure, watchdog
from tests.support import REPO_ROOT, worker_env

_COLLECTIVE_TIMEOUT = 20
# A stalled survivor ends within the timeout, the watchdog's poll and the peer probe.
_BOUND_SECONDS = _COLLECTIVE_TIMEOUT + watchdog._MAX_POLL_SECONDS + 2 * peer_failure.PROBE_SECONDS
_SLACK_SECONDS = 5  # The threads' wake-ups and the exit on a loaded 2-core machine.


def _settings_server():
    """A listening socket whose accepted connections get an HTTP/2 SETTINGS frame."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve():
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            connection.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            connection.close()

    threading.Thread(target=serve, daemon=True).start()
    return server


def test_peer_state_answering_server_answers():
    server = _settings_server()
    try:
        assert peer_failure.peer_state("127.0.0.1", server.getsockname()[1]) == "answers"
    finally:
        server.close()


def test_peer_state_closed_port_unreachable():
    assert peer_failure.peer_state("127.0.0.1", free_ports(1)[0]) == "unreachable"


@pytest.mark.slow
def test_peer_state_silent_listener_does_not_answer():
    """A frozen process: the kernel accepts the connection, nobody answers it."""
    with socket.create_server(("127.0.0.1", 0)) as frozen:
        assert peer_failure.peer_state("127.0.0.1", frozen.getsockname()[1],
                                       timeout=0.5) == "does not answer"


def test_silent_peers_names_only_lost_chief_and_workers():
    server = _settings_server()
    dead = free_ports(1)[0]
    spec = {"chief": [f"127.0.0.1:{server.getsockname()[1]}"],
            "worker": ["127.0.0.1:1", f"127.0.0.1:{dead}"], "ps": [f"127.0.0.1:{dead}"]}
    try:
        silent = peer_failure.silent_peers(spec, "worker 0")
    finally:
        server.close()
    assert silent == [("worker 1", "127.0.0.1", str(dead), "unreachable")]


def test_stall_message_names_peer_and_way_out():
    line = watchdog.stall_message("worker 0", 300, [("worker 1", "h", "2", "does not answer")])
    assert re.fullmatch(r"watchdog: worker 0 made no training progress for 300 s "
                        r"\(collective_timeout\): worker 1 at h:2 does not answer \(.*\); "
                        r"restart every task from the last checkpoint, or raise "
                        r"collective_timeout \(--collective-timeout\) .*\.", line)


def test_stall_ends_the_process_through_process_exit(monkeypatch):
    """The watchdog hands its line to ``process_exit.end``; a program's own handler that
    returns keeps the process, and the watchdog stops."""
    ended = []
    watch = watchdog._Watch()
    watch.timeout, watch.cluster, watch.me = 0.04, {"worker": ["127.0.0.1:1"]}, "worker 0"
    monkeypatch.setattr(watchdog, "_stalled", lambda watch: 1.0)
    monkeypatch.setattr(peer_failure, "silent_peers", lambda cluster, me: [])
    previous = process_exit.set_handler(lambda code, line: ended.append((code, line)))
    try:
        watchdog._run(watch)
    finally:
        process_exit.set_handler(previous)
    assert ended == [(watchdog.EXIT_CODE, watchdog.stall_message("worker 0", 0.04, []))]


_STALLING_JOB = """
import sys, time
import tensorflow as tf
from estimator_dist.hooks import watchdog
from tests.programs import tf1_models

class Stall(tf.compat.v1.train.SessionRunHook):
    def after_run(self, run_context, run_values):
        if run_values is not None and {how!r} == "stall":
            time.sleep(120)
        raise RuntimeError("the step failed")

cluster = {{"worker": ["127.0.0.1:1", "127.0.0.1:{dead}"]}}
x, y = tf1_models.regression_data()
estimator = tf.estimator.Estimator(tf1_models.regression_model_fn, {model_dir!r},
                                   params={{"learning_rate": 0.1}})
hooks = [watchdog.StallWatchdogHook(3, cluster, "worker 0"), Stall()]
try:
    estimator.train(tf1_models.context_input_fn(x, y, 16), max_steps=5, hooks=hooks)
except RuntimeError:
    print("OUTSIDE TRAINING", flush=True)
    time.sleep(12)

class Slow(tf.compat.v1.train.SessionRunHook):
    def after_run(self, run_context, run_values):
        time.sleep(8)

# Another Estimator, in another model dir, without the hook: its slow step is not watched.
other = tf.estimator.Estimator(tf1_models.regression_model_fn, {model_dir!r} + "-other",
                               params={{"learning_rate": 0.1}})
other.train(tf1_models.context_input_fn(x, y, 16), max_steps=1, hooks=[Slow()])
print("FINISHED")
"""


def _stalling_job(python_run, model_dir, how):
    code = _STALLING_JOB.format(how=how, dead=free_ports(1)[0], model_dir=model_dir)
    return python_run(["-c", code], timeout=150)


@pytest.mark.slow
def test_watchdog_ends_stalled_step_naming_peer(python_run, model_dir):
    result = _stalling_job(python_run, model_dir, "stall")
    assert result.returncode == watchdog.EXIT_CODE, result.stderr[-2000:]
    assert re.search(r"^watchdog: worker 0 made no training progress for 3 s "
                     r"\(collective_timeout\): worker 1 at 127\.0\.0\.1:\d+ is unreachable",
                     result.stderr, re.M), result.stderr[-2000:]
    assert "FINISHED" not in result.stdout


@pytest.mark.alone
@pytest.mark.slow
def test_watchdog_leaves_process_out_of_training_alone(python_run, model_dir):
    """An error ends training: the process then waits longer than the timeout, and trains
    another Estimator (no watchdog) through a step longer than it, unharmed."""
    result = _stalling_job(python_run, model_dir, "fail")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "OUTSIDE TRAINING" in result.stdout and "FINISHED" in result.stdout
    assert "watchdog:" not in result.stderr


def _start_workers(model_dir, tmp_path):
    """Two CLI workers of the dense model, each started alone as on two hosts."""
    ports = free_ports(2)
    workers, logs = [], []
    for index in range(2):
        env = worker_env(ports, index)
        logs.append(tmp_path / f"worker{index}.log")
        with open(logs[-1], "w") as log:
            workers.append(subprocess.Popen(
                [sys.executable, "-m", "estimator_dist.train", "--model", "dense", "--strategy",
                 "multi_worker", "--max-steps", "1000000", "--save-checkpoints-steps", "200",
                 "--no-export", "--collective-timeout", str(_COLLECTIVE_TIMEOUT),
                 "--model-dir", model_dir], env=env, stdout=log, stderr=log, cwd=REPO_ROOT))
    return workers, logs


def _tails(workers, logs):
    """Each worker's exit code (None: running) and the end of its log."""
    return "\n".join(f"--- worker {index} (exit code {worker.poll()}):\n"
                     f"{log.read_text()[-1500:]}"
                     for index, (worker, log) in enumerate(zip(workers, logs)))


def _wait_for_checkpoint(model_dir, step, workers, logs, seconds):
    deadline = time.monotonic() + seconds
    while (checkpoint_step.newest_step(model_dir) or 0) < step:  # (Older ones are deleted.)
        assert time.monotonic() < deadline, (f"training never reached step {step}\n"
                                             + _tails(workers, logs))
        assert all(w.poll() is None for w in workers), ("a worker ended early\n"
                                                        + _tails(workers, logs))
        time.sleep(0.5)


@pytest.mark.alone
@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(300)
@pytest.mark.parametrize("fault,state", [(signal.SIGKILL, "is unreachable"),
                                         (signal.SIGSTOP, "does not answer")],
                         ids=["killed", "frozen"])
def test_lost_peer_ends_survivor_within_bound_naming_it(model_dir, tmp_path, fault, state):
    workers, logs = _start_workers(model_dir, tmp_path)
    try:
        _wait_for_checkpoint(model_dir, 200, workers, logs, 200)
        os.kill(workers[1].pid, fault)
        lost_at = time.monotonic()
        code = workers[0].wait(timeout=_BOUND_SECONDS + 30)
        took = time.monotonic() - lost_at
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    text = logs[0].read_text()
    assert code != 0, text[-2000:]
    assert took < _BOUND_SECONDS + _SLACK_SECONDS, f"the survivor took {took:.0f} s"
    assert re.search(rf"worker 1 at 127\.0\.0\.1:\d+ {state}", text), text[-3000:]


_COLLECTIVES = """
import os, sys, tensorflow as tf
timeout = float(sys.argv[1])
@tf.function
def reduce(x):
    return tf.raw_ops.CollectiveReduceV2(
        input=x, group_size=1, group_key=1, instance_key=1, ordering_token=[], merge_op="Add",
        final_op="Id", timeout_seconds=timeout)
x = tf.constant([1.0])
reduce(x)
before = len(os.listdir("/proc/self/task"))
for _ in range(300):
    reduce(x)
print("GROWTH", len(os.listdir("/proc/self/task")) - before)
"""


@pytest.mark.slow
@pytest.mark.parametrize("timeout,least,most", [(30, 300, None), (0, None, 20)],
                         ids=["with_timeout", "without_timeout"])
def test_plain_collective_with_timeout_holds_threads(python_run, timeout, least, most):
    """The TF 2.15 fact behind the watchdog: each collective launched with a timeout keeps
    a thread until the timeout passes (300 finished collectives: about 600 threads)."""
    result = python_run(["-c", _COLLECTIVES, str(timeout)], timeout=120)
    growth = int(re.search(r"^GROWTH (-?\d+)$", result.stdout, re.M).group(1))
    assert least is None or growth >= least, growth
    assert most is None or growth <= most, growth


_STRATEGY_COLLECTIVES = """
import tensorflow as tf
from tensorflow.python.distribute import values as values_lib
from estimator_dist import mends
tf.compat.v1.disable_eager_execution()
strategy = tf.distribute.MultiWorkerMirroredStrategy(
    communication_options=tf.distribute.experimental.CommunicationOptions(timeout_seconds=30))
mends.apply("collective_watchdog", strategy, make_hook=None)
with tf.Graph().as_default() as graph:
    device = strategy.extended.worker_devices[0]
    with tf.device(device):
        value = values_lib.PerReplica((tf.ones([2]),))
    strategy.extended._cross_device_ops.batch_reduce_implementation(
        tf.distribute.ReduceOp.SUM, [(value, device)],
        tf.distribute.experimental.CommunicationOptions())
print("TIMEOUTS", [op.get_attr("timeout_seconds") for op in graph.get_operations()
                   if op.type == "CollectiveReduceV2"])
"""


@pytest.mark.slow
@pytest.mark.parametrize("off,timeouts", [("", "[0.0]"), ("collective_watchdog", "[30.0]")],
                         ids=["mended", "turned_off"])
def test_mend_takes_the_timeout_out_of_the_strategys_collectives(python_run, off, timeouts):
    """The strategy is built with TensorFlow's per-collective timeout; mend
    collective_watchdog takes it out of the collectives its all-reduce builds."""
    result = python_run(["-c", _STRATEGY_COLLECTIVES], timeout=120,
                        env={"ESTIMATOR_DIST_MENDS_OFF": off})
    assert f"TIMEOUTS {timeouts}\n" in result.stdout, result.stderr[-2000:]


# A pause longer than TensorFlow's 10 s coordination-service heartbeat timeout, shorter
# than the stall watchdog's bound.
_PAUSE_SECONDS = 15


def _pause(process, seconds):
    process.send_signal(signal.SIGSTOP)
    time.sleep(seconds)
    process.send_signal(signal.SIGCONT)


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(300)
def test_tf_paused_peer_past_the_heartbeat_aborts_the_collectives(tmp_path):
    """TensorFlow's fact behind mend coordination_heartbeat: in TF2 behaviour a worker
    paused for longer than 10 s ends the collectives of its healthy peer."""
    ports = free_ports(2)
    log = tmp_path / "worker0.log"
    with open(log, "w") as out:
        workers = [subprocess.Popen([sys.executable, "-m", "tests.programs.paused_peer_job",
                                     "1200"], env=worker_env(ports, i), cwd=REPO_ROOT,
                                    stdout=out if i == 0 else subprocess.DEVNULL,
                                    stderr=subprocess.STDOUT if i == 0 else subprocess.DEVNULL)
                   for i in range(2)]
    try:
        deadline = time.monotonic() + 120
        while "STARTED" not in log.read_text():
            assert time.monotonic() < deadline and workers[0].poll() is None, log.read_text()
            time.sleep(0.5)
        _pause(workers[1], _PAUSE_SECONDS)
        code = workers[0].wait(timeout=120)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    text = log.read_text()
    assert code == 1, text[-3000:]
    assert "\nERROR UnavailableError: " in text, text[-3000:]
    # TF 2.15's words, then 2.16+'s.
    assert re.search("heartbeat timeout|stopped sending heartbeats", text), text[-3000:]


@pytest.mark.alone
@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
@pytest.mark.timeout(300)
@pytest.mark.parametrize("paused", [1, 0], ids=["worker", "leader"])
def test_paused_peer_within_collective_timeout_trains_on(model_dir, tmp_path, paused):
    """A CLI worker paused past TensorFlow's heartbeat timeout but within
    collective_timeout: both workers go on training (mend coordination_heartbeat). Worker
    0 leads the coordination service: paused, it answers no heartbeat either."""
    workers, logs = _start_workers(model_dir, tmp_path)
    try:
        _wait_for_checkpoint(model_dir, 200, workers, logs, 200)
        _pause(workers[paused], _PAUSE_SECONDS)
        resumed = checkpoint_step.newest_step(model_dir)
        _wait_for_checkpoint(model_dir, resumed + 400, workers, logs, 120)
    finally:
        for worker in workers:
            worker.kill()
            worker.wait()
    for log in logs:
        assert "heartbeat" not in log.read_text(), _tails(workers, logs)
