"""What the tests share besides fixtures: running Pythons, workers and clusters in
subprocesses under a time limit, and watching their output for a hang."""
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from tests import sharing
from tests.timing import TIMES_VARIABLE

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# TF1 behaviour, as legacy scripts set it: tests/conftest.py reads this variable before
# anything else touches TensorFlow.
TF1_BEHAVIOUR_ENV = "ESTIMATOR_DIST_TEST_TF1_BEHAVIOUR"


def handles_signal(pid, signum):
    """Whether process ``pid`` has installed a handler for ``signum`` (its ``SigCgt``)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            caught = next(line for line in status if line.startswith("SigCgt:"))
    except (OSError, StopIteration):
        return False
    return bool(int(caught.split()[1], 16) >> (signum - 1) & 1)


def launched_tasks(launcher_pid):
    """{(task_type, index): pid} of the tasks a launcher runs now: its children with a
    TF_CONFIG (its reaper has none)."""
    try:
        with open(f"/proc/{launcher_pid}/task/{launcher_pid}/children", encoding="ascii") as f:
            children = [int(pid) for pid in f.read().split()]
    except OSError:
        return {}
    tasks = {}
    for pid in children:
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                env = dict(item.split(b"=", 1) for item in file.read().split(b"\0")
                           if b"=" in item)
        except OSError:  # Ended meanwhile.
            continue
        if b"TF_CONFIG" in env:
            task = json.loads(env[b"TF_CONFIG"])["task"]
            tasks[(task["type"], task["index"])] = pid
    return tasks


def run_python(args, *, timeout, env=None, cwd=None):
    """Runs ``python ARGS`` in a subprocess with a time limit; returns CompletedProcess.
    ``env`` adds to this process's environment (less TF_CONFIG); a None value removes."""
    full_env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd or REPO_ROOT,
                          env={k: v for k, v in full_env.items() if v is not None})


def worker_env(ports, index):
    """The environment of worker ``index`` of a cluster of workers on 127.0.0.1 ``ports``."""
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    return dict(os.environ, TF_CONFIG=json.dumps(
        {"cluster": cluster, "task": {"type": "worker", "index": index}}))


def cluster_env(spec, task_type, index):
    """The environment of task ``task_type`` ``index`` of cluster ``spec`` (any roles: a
    chief, workers, ps tasks), for a task started as a process of its own."""
    return dict(os.environ, TF_CONFIG=json.dumps(
        {"cluster": spec, "task": {"type": task_type, "index": index}}))


def run_workers(commands, ports, timeout):
    """Runs one command per worker (``worker_env``), each to its own end: no task is
    stopped because another failed. Returns (stdout, stderr, exit code) of each."""
    workers = [subprocess.Popen(command, env=worker_env(ports, i), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
               for i, command in enumerate(commands)]
    # Both pipes are drained concurrently so that no worker blocks on a full pipe.
    with concurrent.futures.ThreadPoolExecutor(len(workers)) as pool:
        futures = [pool.submit(worker.communicate, timeout=timeout) for worker in workers]
        try:
            outputs = [future.result() for future in futures]
        finally:
            for worker in workers:
                worker.kill()
    return [output + (worker.returncode,) for output, worker in zip(outputs, workers)]


def run_pythons(args_list, *, timeout, env=None):
    """Runs ``python ARGS`` for each ARGS of ``args_list`` at once (for independent runs
    whose time is mostly TensorFlow's import and start); returns a CompletedProcess each,
    in order. Raises TimeoutExpired if any takes longer than ``timeout`` seconds."""
    full_env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    full_env.update(env or {})
    processes = [subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=full_env,
                                  cwd=REPO_ROOT) for args in args_list]
    results = [None] * len(processes)

    def communicate(index):
        try:
            results[index] = processes[index].communicate(timeout=timeout)
        except subprocess.TimeoutExpired as error:
            results[index] = error

    threads = [threading.Thread(target=communicate, args=(i,)) for i in range(len(processes))]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for process in processes:
            process.kill()
            process.wait()
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return [subprocess.CompletedProcess(process.args, process.returncode, out, err)
            for process, (out, err) in zip(processes, results)]


# Under ``pytest -n N`` the tests that share runs (``selected_values``, ``run_together``)
# carry this mark, so that one worker runs them and their runs once.
SHARED_RUNS = pytest.mark.xdist_group("shared_runs")


def selected_values(request, name):
    """The values of parameter ``name`` of the tests of this test function, other
    parameters as in this test, that this session runs (this test's value among them).
    Such tests carry ``SHARED_RUNS``."""
    mine = request.node.callspec.params
    values = []
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if (callspec is None or getattr(item, "originalname", None) != request.node.originalname
                or item.path != request.node.path):
            continue
        if all(callspec.params.get(k) == v for k, v in mine.items() if k != name):
            values.append(callspec.params[name])
    return values


_TOGETHER = {}


def run_together(args_by_key, key, *, timeout, env=None):
    """The CompletedProcess of ``python args_by_key[key]``. Those of ``args_by_key`` not run
    yet in this session run first, at once (``run_pythons``); keys name a run across the
    tests that share it (a sibling test's run uses a model dir of its own)."""
    todo = [k for k in args_by_key if k not in _TOGETHER]
    if todo:
        for k, result in zip(todo, run_pythons([args_by_key[k] for k in todo],
                                               timeout=timeout, env=env)):
            _TOGETHER[k] = result
    return _TOGETHER[key]


def tf1_behaviour_runs(test_file, module_globals, *, per_run):
    """The test functions defined so far in the module of ``test_file`` (its
    ``globals()``), ``per_run`` to a process under TF1 behaviour: pytest parameters of node
    ids for ``assert_passes_under_tf1_behaviour``, so that ``pytest -n N`` spreads them."""
    names = [name for name, value in module_globals.items()
             if name.startswith("test_") and callable(value)]
    return [pytest.param([f"{test_file}::{name}" for name in names[i:i + per_run]],
                         id=f"part{i // per_run + 1}")
            for i in range(0, len(names), per_run)]


def assert_passes_under_tf1_behaviour(test_file, *pytest_args, timeout):
    """Runs the tests of ``test_file`` again in a process that calls
    ``tf.compat.v1.disable_v2_behavior()`` first (what legacy scripts do; it can only
    happen before TF starts) and asserts they pass. The run's time counts as this test's
    (``tests/timing.py``), not as its tests' again, and so does its share of the machine
    (``tests/sharing.py``): its tests take none of their own, or an ``alone`` test queued
    meanwhile would wait for this test while holding the turnstile they wait for, until the
    time limit ended the worker. ``timeout`` must stay below this test's time limit."""
    done = run_python(["-m", "pytest", test_file, "-q", "-p", "no:cacheprovider", *pytest_args],
                      timeout=timeout,
                      env={TF1_BEHAVIOUR_ENV: "1", TIMES_VARIABLE: "", sharing.RUN_ID: None})
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
    assert done.returncode == 0, "\n".join(failed) or done.stdout[-3000:]


# How long a process must outlive the healthy run it is compared with to count as hung:
# the healthy run does the same work and ends within seconds, even on a loaded 2-core CI.
HANG_MARGIN_SECONDS = 30


class WatchedPython:
    """``python ARGS`` in a subprocess (stderr into stdout) whose output lines are read as
    they come, for tests that show a hang: wait for the line of the part that ends, then
    check the process outlives it by ``HANG_MARGIN_SECONDS`` instead of waiting out a long
    timeout. Use as a context manager: leaving it stops the process."""

    def __init__(self, args, *, env=None):
        full_env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
        full_env.update(env or {})
        self.process = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, env=full_env,
                                        cwd=REPO_ROOT)
        self._lines = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            with self._changed:
                self._lines.append(line)
                self._changed.notify_all()
        with self._changed:
            self._lines.append(None)  # End of output.
            self._changed.notify_all()

    @property
    def output(self):
        with self._changed:
            return "".join(line for line in self._lines if line is not None)

    def wait_for_line(self, pattern, timeout):
        """True once a line matches regex ``pattern``; False if the output ends first or
        ``timeout`` seconds pass."""
        regex = re.compile(pattern)

        def matched():
            return any(regex.search(line) for line in self._lines if line is not None)

        with self._changed:
            self._changed.wait_for(lambda: matched() or self._lines[-1:] == [None], timeout)
            return matched()

    def outlives(self, seconds=HANG_MARGIN_SECONDS):
        """True if the process is still running ``seconds`` from now."""
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return True
        return False

    def _children(self):
        try:
            with open(f"/proc/{self.process.pid}/task/{self.process.pid}/children") as f:
                return [int(pid) for pid in f.read().split()]
        except OSError:
            return []

    def stop(self, grace=40):
        """Kills the process's children (a launcher's tasks, each a process group: a hung
        task may take SIGTERM only after the launcher's grace), then SIGTERM, then SIGKILL
        after ``grace`` seconds; waits for the rest of the output."""
        if self.process.poll() is None:
            for child in self._children():
                try:
                    os.killpg(child, signal.SIGKILL)
                except OSError:  # Not a group leader, or gone.
                    try:
                        os.kill(child, signal.SIGKILL)
                    except OSError:
                        pass
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.stop()
