"""A parameter_server chief or worker whose ps task is gone ends, naming the ps
(``hooks.ps_watch``), without a launcher: each task here is a process of its own, as a
pod is on Kubernetes."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from estimator_dist import checkpoint_step, process_exit, ps_stop
from estimator_dist.supervisor.tasks import free_ports
from estimator_dist.distribute import cluster
from estimator_dist.hooks import ps_watch
from estimator_dist.mends import internals
from tests.support import REPO_ROOT, cluster_env


# --- The rule and the line -----------------------------------------------------------------


@pytest.mark.parametrize("states, seconds, gone", [
    ({"unreachable"}, ps_watch.REFUSED_SECONDS - 0.1, False),
    ({"unreachable"}, ps_watch.REFUSED_SECONDS, True),
    ({"does not answer"}, ps_watch.REFUSED_SECONDS, False),  # Stopped, frozen or slow.
    ({"does not answer"}, ps_watch.SILENT_SECONDS - 0.1, False),
    ({"does not answer"}, ps_watch.SILENT_SECONDS, True),
    ({"unreachable", "does not answer"}, ps_watch.REFUSED_SECONDS, False),
    ({"unreachable", "does not answer"}, ps_watch.SILENT_SECONDS, True),
])
def test_ps_gone_only_after_failing_every_probe_for_its_bound(states, seconds, gone):
    assert ps_watch.is_gone(100.0, states, 100.0 + seconds) is gone


def test_ps_tasks_named_with_their_address():
    spec = {"chief": ["10.0.0.1:2222"], "ps": ["10.0.0.2:2222", "[::1]:2223"]}
    assert ps_watch.ps_tasks(spec) == [("ps 0", "10.0.0.2", "2222"), ("ps 1", "::1", "2223")]


def test_gone_line_names_the_ps_and_what_is_saved():
    line = ps_watch.gone_line("worker 1", [("ps 0", "127.0.0.1", "2224", "unreachable")], 4.2,
                              "this task writes no checkpoints")
    assert line == ("ps_watch: worker 1 stopped training: ps 0 at 127.0.0.1:2224 is "
                    "unreachable (its process is gone or its host is down), for 4 s, and the "
                    "variables live there; this task writes no checkpoints; restart every "
                    "task to resume from the last checkpoint.")


def test_newest_checkpoint_words(tmp_path):
    assert ps_watch.newest_checkpoint_words(str(tmp_path)) == f"{tmp_path} holds no checkpoint yet"
    assert ps_watch.newest_checkpoint_words("gs://b/run") == ("the checkpoints in gs://b/run "
                                                              "stay as they are")


def test_no_thread_of_this_process_trains_outside_estimator():
    assert internals.estimator_training() is None


def test_watch_starts_one_thread_however_often_called(monkeypatch):
    watch, done = ps_watch._Watch(), threading.Event()
    monkeypatch.setattr(ps_watch, "_WATCH", watch)
    monkeypatch.setattr(ps_watch, "_run", lambda watch: done.wait())  # Ends with the test.
    spec = {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"], "ps": ["127.0.0.1:3"]}
    before = threading.active_count()
    try:
        for _ in range(3):
            ps_watch.watch(cluster.TFConfig(cluster=spec, task_type="worker", task_index=0))
            ps_watch.watch(cluster.TFConfig(cluster=spec, task_type="chief", task_index=0))
        assert threading.active_count() == before + 1
    finally:
        done.set()
    watch.thread.join(timeout=5)
    # Not training: a round asks no ps (its port 3 would refuse) and forgets failures.
    watch.failing["ps 0"] = (0.0, {"unreachable"})
    assert ps_watch.check(watch) is None
    assert watch.failing == {}


def test_check_while_training_names_a_ps_refused_for_its_bound(monkeypatch, tmp_path):
    port = free_ports(1)[0]  # Nothing listens there: refused, as a ps that is gone.
    watch = ps_watch._Watch()
    watch.ps, watch.me = (("ps 0", "127.0.0.1", str(port)),), "chief 0"
    monkeypatch.setattr(internals, "estimator_training", lambda: (1, str(tmp_path)))
    assert ps_watch.check(watch) is None  # Failing since now only.
    first, states = watch.failing["ps 0"]
    watch.failing["ps 0"] = (first - ps_watch.REFUSED_SECONDS, states)
    assert ps_watch.check(watch) == (
        f"ps_watch: chief 0 stopped training: ps 0 at 127.0.0.1:{port} is unreachable (its "
        f"process is gone or its host is down), for {ps_watch.REFUSED_SECONDS:.0f} s, and the "
        f"variables live there; {tmp_path} holds no checkpoint yet; restart every task to "
        "resume from the last checkpoint.")


@pytest.mark.parametrize("me, line", [
    ("chief 0", "ps_watch: chief 0 stops training after this step and saves it: ps 0 got "
                "SIGTERM (the variables live there)"),
    ("worker 1", "ps_watch: worker 1 stops training after this step (the chief saves it): "
                 "ps 0 got SIGTERM (the variables live there)")])
def test_ps_s_word_to_stop_stops_training_once_with_one_line(monkeypatch, capsys, tmp_path,
                                                               me, line):
    stops = []
    monkeypatch.setattr(ps_watch.preemption, "stop_training", stops.append)
    watch = ps_watch._Watch()
    watch.me, watch.started = me, time.time()
    ps_watch._stop_if_told(watch, str(tmp_path))  # Training starts: no word yet.
    ps_stop.announce(str(tmp_path), "ps 0 got SIGTERM")
    for _ in range(3):
        ps_watch._stop_if_told(watch, str(tmp_path))
    assert stops == [signal.SIGTERM]
    assert capsys.readouterr().err.splitlines() == [line]


def test_ps_s_word_from_an_earlier_run_stops_nothing(monkeypatch, tmp_path):
    stops = []
    monkeypatch.setattr(ps_watch.preemption, "stop_training", stops.append)
    ps_stop.announce(str(tmp_path), "ps 0 got SIGTERM")
    watch = ps_watch._Watch()
    watch.me, watch.started = "chief 0", time.time() + 1  # This process started after it.
    for _ in range(2):
        ps_watch._stop_if_told(watch, str(tmp_path))
    assert stops == []


def test_gone_ps_ends_the_process_through_process_exit(monkeypatch):
    """The watch hands its line to ``process_exit.end``; a program's own handler that
    returns keeps the process, and the watch stops."""
    ended = []
    monkeypatch.setattr(ps_watch, "PROBE_EVERY_SECONDS", 0)
    monkeypatch.setattr(ps_watch, "check", lambda watch: "ps_watch: chief 0 stopped training")
    previous = process_exit.set_handler(lambda code, line: ended.append((code, line)))
    try:
        ps_watch._run(ps_watch._Watch())
    finally:
        process_exit.set_handler(previous)
    assert ended == [(ps_watch.EXIT_CODE, "ps_watch: chief 0 stopped training")]


# --- A real job, each task its own process -------------------------------------------------

# From the ps's exit to the chief's and the worker's (Kubernetes' grace is 30 s).
_BOUND_SECONDS = 20
# A ps stopped (SIGSTOP) this long, then continued, is not gone: more than REFUSED_SECONDS,
# less than SILENT_SECONDS.
_FROZEN_SECONDS = 6


def _line(role, port):
    return re.compile(rf"^ps_watch: {role} 0 stopped training: ps 0 at 127\.0\.0\.1:{port} is "
                      r"unreachable \(its process is gone or its host is down\), for \d+ s, "
                      r"and the variables live there; (.*); restart every task to resume "
                      r"from the last checkpoint\.$", re.MULTILINE)


def _start(tmp_path):
    model_dir = str(tmp_path / "model")
    spec, _ = cluster.local_cluster(free_ports(3), 2, num_ps=1)
    tasks = {}
    for role in ("ps", "chief", "worker"):
        with open(tmp_path / f"{role}.log", "w") as log:
            tasks[role] = subprocess.Popen(
                [sys.executable, "-m", "estimator_dist.train", "--strategy", "parameter_server",
                 "--model-dir", model_dir, "--max-steps", "1000000", "--no-export"],
                env=cluster_env(spec, role, 0), stdout=log, stderr=subprocess.STDOUT,
                cwd=REPO_ROOT)
    return tasks, spec, model_dir


def _wait_training(tasks, model_dir, tmp_path):
    """Until the chief's first checkpoint: step 0, or 1 when the worker's first step came
    before the chief's first save (asynchronous training)."""
    started = time.monotonic()
    while not os.path.exists(os.path.join(model_dir, "checkpoint")):
        for role, task in tasks.items():
            assert task.poll() is None, (tmp_path / f"{role}.log").read_text()[-2000:]
        assert time.monotonic() - started < 180, "the job never trained"
        time.sleep(0.5)
    time.sleep(2)


def _freeze_and_continue(ps, tasks):
    """A ps stopped for ``_FROZEN_SECONDS``, then continued: nothing ends."""
    ps.send_signal(signal.SIGSTOP)
    time.sleep(_FROZEN_SECONDS)
    ps.send_signal(signal.SIGCONT)
    time.sleep(2)
    assert {role: task.poll() for role, task in tasks.items()} == dict.fromkeys(tasks)


@pytest.mark.alone
@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(300)
@pytest.mark.both_ends
def test_chief_and_worker_end_naming_the_ps_when_it_is_gone(tmp_path):
    signum = signal.SIGKILL
    tasks, spec, model_dir = _start(tmp_path)
    port = spec["ps"][0].rsplit(":", 1)[1]
    try:
        _wait_training(tasks, model_dir, tmp_path)
        tasks["ps"].send_signal(signum)
        sent = time.monotonic()
        ps_code = tasks["ps"].wait(timeout=30)
        died = time.monotonic()
        codes, seconds = {}, {}
        for role in ("chief", "worker"):
            codes[role] = tasks[role].wait(timeout=_BOUND_SECONDS + 10)
            seconds[role] = time.monotonic() - died
    finally:
        for task in tasks.values():
            task.kill()
            task.wait()
    logs = {role: (tmp_path / f"{role}.log").read_text() for role in tasks}
    print(f"ps gone {died - sent:.1f} s after {signal.Signals(signum).name}; then chief "
          f"{seconds['chief']:.1f} s, worker {seconds['worker']:.1f} s")
    assert ps_code == -signal.SIGKILL
    step = checkpoint_step.newest_step(model_dir)
    for role in ("chief", "worker"):
        assert codes[role] == ps_watch.EXIT_CODE, logs[role][-2000:]
        assert seconds[role] < _BOUND_SECONDS
        assert "Traceback" not in logs[role], logs[role][-2000:]
        found = _line(role, port).search(logs[role])
        assert found, logs[role][-2000:]
        assert logs[role].rstrip().endswith(found[0])  # The last line.
    assert _line("chief", port).search(logs["chief"])[1] == (
        f"the newest checkpoint in {model_dir} is step {step}, as it was")
    assert _line("worker", port).search(logs["worker"])[1] == (
        "this task writes no checkpoints, the chief's stay as they are")
    # The chief's checkpoint is whole: its files are there, and nothing half-written.
    assert os.path.exists(os.path.join(model_dir, f"model.ckpt-{step}.index"))
    assert not [name for name in os.listdir(model_dir) if "temp" in name]


_STOPPED = re.compile(r"^python -m estimator_dist\.train: SIGTERM: stopped training at step "
                      r"(\d+); (.*) \(run again with the same --model-dir to resume\)$",
                      re.MULTILINE)


@pytest.mark.alone
@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.timeout(300)
def test_ps_sigterm_stops_chief_and_worker_after_their_step_the_chief_saving_it(tmp_path):
    """SIGTERM to the ps alone (a cluster manager's): it tells its chief and worker
    (``ps_stop``), which stop after their step; the chief saves it while the ps still
    serves, and the ps ends once neither answers. First, a ps that is only slow (stopped,
    then continued) is not gone."""
    tasks, _, model_dir = _start(tmp_path)
    try:
        _wait_training(tasks, model_dir, tmp_path)
        _freeze_and_continue(tasks["ps"], tasks)
        before = checkpoint_step.newest_step(model_dir)
        tasks["ps"].send_signal(signal.SIGTERM)
        codes = {role: tasks[role].wait(timeout=_BOUND_SECONDS + 10)
                 for role in ("chief", "worker", "ps")}
    finally:
        for task in tasks.values():
            task.kill()
            task.wait()
    logs = {role: (tmp_path / f"{role}.log").read_text() for role in tasks}
    assert codes["chief"] == codes["ps"] == 128 + signal.SIGTERM, logs["chief"][-2000:]
    # A worker still creating its session stops after its first step; one that outlasts the
    # ps's bound there ends as when the ps is gone.
    assert codes["worker"] in (128 + signal.SIGTERM, ps_watch.EXIT_CODE), logs["worker"][-2000:]
    for role in tasks:
        assert "Traceback" not in logs[role], logs[role][-2000:]
    assert ("ps_watch: chief 0 stops training after this step and saves it: ps 0 got SIGTERM "
            "(the variables live there)") in logs["chief"]
    step, saved = _STOPPED.search(logs["chief"]).groups()
    # The chief saved its stop step; Estimator's closing save after it holds the global
    # step then. The asynchronous worker may have stepped on meanwhile, never past its own
    # last step: between the chief's read of its stop step and its save (one run: stopped
    # at 2165, saved 2166), or before the closing save (2324 saved, closing save 2326, the
    # worker stopped at 2456).
    newest = checkpoint_step.newest_step(model_dir)
    worker_stop = _STOPPED.search(logs["worker"])
    last = max(int(step) + 1, int(worker_stop.group(1)) if worker_stop else 0)
    prefix = os.path.join(model_dir, "model.ckpt-")
    assert saved.startswith(f"saved checkpoint {prefix}"), saved
    assert before < int(step) <= checkpoint_step.step_of(saved) <= newest <= last
    assert "SIGTERM: stopped serving variables" in logs["ps"]
