"""SIGTERM to one task of a cluster, for every role: it saves what it owns and ends within
20 s (Kubernetes sends SIGKILL 30 s after SIGTERM).

Each case starts the CLI's tasks itself, with their TF_CONFIG (the launcher would forward
the signal to every task), waits until the task is where the case wants it, sends it
SIGTERM alone and times its exit.
"""
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from estimator_dist.supervisor.tasks import free_ports
from estimator_dist.job import settings as settings_lib, stop_deadline
from estimator_dist import checkpoint_step
from estimator_dist.commands import train as train_lib
from estimator_dist.distribute import cluster
from tests.support import REPO_ROOT

pytestmark = [pytest.mark.multi_process, pytest.mark.slow]

_BOUND_SECONDS = 20


def _stand_in(spec, task_type, index):
    """A listening socket on a task's port: the rendezvous's probe finds it there, though
    no task runs (so a worker gets past the rendezvous and waits in TensorFlow)."""
    return socket.create_server(("127.0.0.1", int(spec[task_type][index].rsplit(":", 1)[1])))


def _start_cluster(tmp_path, strategy, workers, ps, evaluator, running, stand_ins,
                   verbose=()):
    """Starts the ``running`` (task_type, index) tasks of a local cluster of the CLI's
    dense model (the ``verbose`` ones with ``--verbose``: TensorFlow's INFO log kept), and
    sockets for the ``stand_ins``; returns {(task_type, index): Popen}, the sockets and the
    model dir."""
    model_dir = str(tmp_path / "model")
    spec, _ = cluster.local_cluster(free_ports(workers + ps), workers, num_ps=ps,
                                    evaluator=evaluator)
    sockets = [_stand_in(spec, *task) for task in stand_ins]
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    tasks = {}
    for task_type, index in running:
        with open(tmp_path / f"{task_type}{index}.log", "w") as log:
            tasks[(task_type, index)] = subprocess.Popen(
                [sys.executable, "-m", "estimator_dist.train", "--strategy", strategy,
                 "--model-dir", model_dir, "--max-steps", "1000000", "--no-export",
                 "--rendezvous-timeout", "300",
                 *(["--verbose"] if (task_type, index) in verbose else [])],
                env={**env, "TF_CONFIG": cluster.TFConfig(spec, task_type, index).to_json()},
                stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    return tasks, sockets, model_dir


_PS = ("parameter_server", 2, 1, True,
       [("chief", 0), ("worker", 0), ("ps", 0), ("evaluator", 0)], [])
_MW = ("multi_worker", 2, 0, False, [("worker", 0), ("worker", 1)], [])
_STOPPED = "SIGTERM: stopped training at step"
# Logged once a task waits: by TensorFlow's session manager (INFO) for the chief's
# variables; by the evaluator's loop (mend evaluator_end) for checkpoints to evaluate.
_MODEL_NOT_READY = "Waiting for model to be ready."
_NO_CHECKPOINT_YET = "evaluator: evaluating each new checkpoint in"
_INFO_LINES = (_MODEL_NOT_READY,)  # Logged with --verbose only.
_INTERRUPTED = "interrupted by SIGTERM"
# Ready: "training" (the step-0 checkpoint exists, then 3 s more) or a line of the task's
# log (for one of _INFO_LINES the task runs with --verbose).
# (cluster, the task signalled, when it is ready for the signal, the log lines it may end
# with)
_CASES = {
    "ps_chief": (_PS, ("chief", 0), "training", (_STOPPED,)),
    # A worker that owns no checkpoint may still be in TF's session manager's 30 s wait
    # for the chief's variables when the chief's first checkpoint appears.
    "ps_worker": (_PS, ("worker", 0), "training", (_STOPPED, _INTERRUPTED)),
    "ps_ps": (_PS, ("ps", 0), "training", ("SIGTERM: stopped serving variables",)),
    "ps_evaluator": (_PS, ("evaluator", 0), "training", (_INTERRUPTED,)),
    # Worker 1 signalled, both stop after the same step; worker 0 may exit while worker 1
    # still waits for it in TensorFlow at the end of training (seen once in three runs):
    # then the bound ends worker 1, whose line says it owns no checkpoint.
    "multi_worker_worker": (_MW, ("worker", 1), "training",
                            (_STOPPED, "(still blocked in TensorFlow; "
                                       f"{stop_deadline.WRITES_NO_CHECKPOINTS})")),
    # Waiting: for a peer in the rendezvous; past it (the chief's port answers, but no
    # chief initialises the variables) in TensorFlow's session manager; for the first
    # checkpoint.
    "waiting_rendezvous": (_MW[:4] + ([("worker", 0)], []), ("worker", 0),
                           "rendezvous: waiting", ("rendezvous: stopped by SIGTERM",)),
    "waiting_ps_worker": (_PS[:4] + ([("worker", 0), ("ps", 0)], [("chief", 0)]),
                          ("worker", 0), _MODEL_NOT_READY, (_INTERRUPTED,)),
    "waiting_evaluator": (_PS[:4] + ([("evaluator", 0)], []), ("evaluator", 0),
                          _NO_CHECKPOINT_YET, (_INTERRUPTED,)),
}


def _is_ready(ready, model_dir, log_path):
    if ready == "training":
        return os.path.exists(os.path.join(model_dir, "model.ckpt-0.index"))
    return ready in log_path.read_text()


def _wait_ready(ready, task, model_dir, log_path):
    started = time.monotonic()
    while not _is_ready(ready, model_dir, log_path):
        assert task.poll() is None, log_path.read_text()[-2000:]
        assert time.monotonic() - started < 240, "the task never got ready"
        time.sleep(0.5)
    if ready == "training":
        time.sleep(3)


@pytest.mark.alone
@pytest.mark.timeout(400)
@pytest.mark.parametrize("case", sorted(_CASES))
def test_sigterm_role_ends_within_bound(tmp_path, case):
    (strategy, workers, ps, evaluator, running, stand_ins), signalled, ready, ends = (
        _CASES[case])
    tasks, sockets, model_dir = _start_cluster(
        tmp_path, strategy, workers, ps, evaluator, running, stand_ins,
        verbose=[signalled] if ready in _INFO_LINES else [])
    log_path = tmp_path / f"{signalled[0]}{signalled[1]}.log"
    try:
        _wait_ready(ready, tasks[signalled], model_dir, log_path)
        before = checkpoint_step.newest_step(model_dir)
        tasks[signalled].send_signal(signal.SIGTERM)
        sent = time.monotonic()
        code = tasks[signalled].wait(timeout=60)
        seconds = time.monotonic() - sent
    finally:
        for task in tasks.values():
            task.kill()
            task.wait()
        for sock in sockets:
            sock.close()
    text = log_path.read_text()
    print(f"{case}: exit {code} after {seconds:.1f} s")
    assert code == 128 + signal.SIGTERM, text[-2000:]
    assert seconds < _BOUND_SECONDS
    assert any(line in text for line in ends), text[-2000:]
    assert "Traceback" not in text, text[-2000:]
    if signalled in (("chief", 0), ("ps", 0)):  # The ps tells the chief, which saves.
        assert checkpoint_step.newest_step(model_dir) > before  # The chief saved its step.


# Through the launcher, as `timeout` or Kubernetes stops it: SIGTERM to the launcher, which
# forwards it to every task. Both workers must stop after the same step, the chief must
# save it, and every task should be gone within a few seconds.
_PROMPT_SECONDS = 8
_STOP_LINE = re.compile(r"^\[worker (\d)\] python -m estimator_dist\.train: SIGTERM: "
                        r"stopped training at step (\d+); (.*)$", re.MULTILINE)
_DEADLINE_LINE = re.compile(r"^\[worker (\d)\] python -m estimator_dist\.train: SIGTERM: "
                            r"stopped \d+ s after the signal \((.*)\)$", re.MULTILINE)


@pytest.mark.alone
@pytest.mark.timeout(400)
@pytest.mark.both_ends
def test_launch_multi_worker_sigterm_saves_the_stop_step_and_ends_promptly(tmp_path):
    model_dir = str(tmp_path / "model")
    log_path = tmp_path / "launch.log"
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "estimator_dist.launch", "--workers", "2", "--",
             sys.executable, "-m", "estimator_dist.train", "--model", "dense", "--strategy",
             "multi_worker", "--max-steps", "100000000", "--save-checkpoints-steps", "100000",
             "--no-export", "--model-dir", model_dir],
            env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    try:
        _wait_ready("training", process, model_dir, log_path)
        time.sleep(10)  # Training runs some seconds past the step-0 checkpoint.
        process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        code = process.wait(timeout=60)
        seconds = time.monotonic() - sent
    finally:
        process.kill()
        process.wait()
    text = log_path.read_text()
    print(f"every task ended {seconds:.1f} s after SIGTERM to the launcher")
    assert code == 128 + signal.SIGTERM, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert "without a final checkpoint" not in text, text[-3000:]
    stops = {int(worker): (int(step), rest) for worker, step, rest in _STOP_LINE.findall(text)}
    assert stops, text[-3000:]
    steps = {step for step, _ in stops.values()}
    assert len(steps) == 1, stops  # Both workers stopped after the same step,
    step = steps.pop()
    assert checkpoint_step.newest_step(model_dir) == step  # and the chief saved it.
    assert os.path.exists(os.path.join(model_dir, f"model.ckpt-{step}.index"))
    if 0 in stops:
        assert stops[0][1].startswith(f"saved checkpoint {model_dir}/model.ckpt-{step} ")
    for worker, why in _DEADLINE_LINE.findall(text):  # Ended by the bound: say what is saved.
        assert why.endswith(stop_deadline.WRITES_NO_CHECKPOINTS if worker == "1" else
                            f"the newest checkpoint in {model_dir} is step {step}"), why
    assert seconds < _BOUND_SECONDS, text[-3000:]
    if seconds >= _PROMPT_SECONDS:
        # Known, cause not found: TensorFlow's Session.close() can block in a task whose
        # peer has already ended (traced in 2 of 3 ten-minute runs, for 15 s; seconds in
        # short ones). See docs/cluster.md, "multi_worker through the launcher".
        pytest.xfail(f"tasks ended {seconds:.1f} s after SIGTERM, not within "
                     f"{_PROMPT_SECONDS} s (known: TensorFlow's session close can block)")


# --- The mechanism, without TensorFlow: a process blocked past its handlers ----------------


def _run_signalled(code, signum=signal.SIGTERM, timeout=30):
    """Runs ``code`` in a Python process; once it prints "ready", sends ``signum``;
    returns (exit code, seconds from the signal to the exit, stderr)."""
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        assert process.stdout.readline().strip() == "ready"
        sent = time.monotonic()  # Before the signal: the handler may run before we read it.
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=timeout)
        return process.returncode, time.monotonic() - sent, stderr
    finally:
        process.kill()
        process.wait()


_BLOCKED = ("import signal, time\n"
            "from estimator_dist.job import stop_deadline\n"
            "signal.signal(signal.SIGTERM, lambda s, f: None)  # A handler that never ends it.\n"
            "with stop_deadline.bounded('prog', bound=2{linger}):\n"
            "    print('ready', flush=True)\n"
            "    time.sleep(60)\n")


@pytest.mark.timeout(60)
def test_bounded_handler_that_never_ends_process_exits_after_bound():
    code, seconds, stderr = _run_signalled(_BLOCKED.format(linger=""))
    assert code == 128 + signal.SIGTERM
    assert 2 <= seconds < 10
    assert stderr.strip() == ("prog: SIGTERM: stopped 2 s after the signal (still blocked "
                              "in TensorFlow)")


@pytest.mark.timeout(60)
def test_bounded_program_handler_keeps_the_process_and_the_deadline_stops():
    """A program's own ``process_exit`` handler gets the end once; when it returns, the
    process runs on."""
    code = ("import signal, sys, time\n"
            "from estimator_dist import process_exit\n"
            "from estimator_dist.job import stop_deadline\n"
            "process_exit.set_handler(lambda code, line: print('handled', code, line,\n"
            "                                                  file=sys.stderr, flush=True))\n"
            "signal.signal(signal.SIGTERM, lambda s, f: None)\n"
            "with stop_deadline.bounded('prog', bound=1):\n"
            "    print('ready', flush=True)\n"
            "    time.sleep(4)\n")
    exit_code, seconds, stderr = _run_signalled(code)
    assert exit_code == 0 and seconds >= 3
    assert stderr.strip() == ("handled 143 prog: SIGTERM: stopped 1 s after the signal "
                              "(still blocked in TensorFlow)")


_BLOCKED_SAVING = ("import os, signal, time\n"
                   "from estimator_dist.job import stop_deadline\n"
                   "def save(signum, frame):  # The chief's save at the signal.\n"
                   "    with open(os.path.join(MODEL_DIR, 'checkpoint'), 'w') as file:\n"
                   "        file.write('model_checkpoint_path: \"model.ckpt-1200\"\\n')\n"
                   "signal.signal(signal.SIGTERM, save)\n"
                   "with stop_deadline.bounded('prog', bound=2) as deadline:\n"
                   "    deadline.saved = SAVED\n"
                   "    print('ready', flush=True)\n"
                   "    time.sleep(60)\n")


@pytest.mark.timeout(60)
def test_bounded_line_names_the_checkpoint_saved_after_the_signal(tmp_path):
    """A chief that saved its step at the signal, then stayed blocked: the line names that
    checkpoint, read at the bound (not "without a final checkpoint")."""
    code = _BLOCKED_SAVING.replace("MODEL_DIR", repr(str(tmp_path))).replace(
        "SAVED", f"stop_deadline.newest_checkpoint({str(tmp_path)!r})")
    exit_code, _, stderr = _run_signalled(code)
    assert exit_code == 128 + signal.SIGTERM
    assert stderr.strip() == (f"prog: SIGTERM: stopped 2 s after the signal (still blocked "
                              f"in TensorFlow; the newest checkpoint in {tmp_path} is step 1200)")


@pytest.mark.timeout(60)
def test_bounded_line_of_a_task_that_writes_no_checkpoints(tmp_path):
    code = _BLOCKED_SAVING.replace("MODEL_DIR", repr(str(tmp_path))).replace(
        "SAVED", "lambda: stop_deadline.WRITES_NO_CHECKPOINTS")
    exit_code, _, stderr = _run_signalled(code)
    assert exit_code == 128 + signal.SIGTERM
    assert stderr.strip() == ("prog: SIGTERM: stopped 2 s after the signal (still blocked "
                              "in TensorFlow; this task writes no checkpoints; the chief does)")


def test_newest_checkpoint_words(tmp_path):
    words = stop_deadline.newest_checkpoint(str(tmp_path))
    assert words() == f"{tmp_path} holds no checkpoint yet"
    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "model.ckpt-0"\n')
    assert words() == f"the newest checkpoint in {tmp_path} is step 0"
    assert stop_deadline.newest_checkpoint("gs://bucket/run")() == (
        "the checkpoints saved are in gs://bucket/run")


@pytest.mark.parametrize("task_type, index, chief", [("worker", 0, True), ("worker", 1, False),
                                                     ("evaluator", 0, False)])
def test_train_saved_words_by_role(monkeypatch, tmp_path, task_type, index, chief):
    spec, _ = cluster.local_cluster([2222, 2223], 2, evaluator=True)
    monkeypatch.setenv("TF_CONFIG", cluster.TFConfig(spec, task_type, index).to_json())
    settings = settings_lib.RunSettings(strategy="multi_worker", model_dir=str(tmp_path))
    words = train_lib._saved_words(settings)()
    assert words == (f"{tmp_path} holds no checkpoint yet" if chief
                     else stop_deadline.WRITES_NO_CHECKPOINTS)


# A task whose SIGTERM handler settles the deadline (as the CLI's last training hook does),
# saved ``saved_after`` seconds later, and then stays blocked or ends (``then``).
_SETTLING = ("import signal, time\n"
             "from estimator_dist.job import stop_deadline\n"
             "with stop_deadline.bounded('prog', bound=30) as deadline:\n"
             "    def stop(signum, frame):\n"
             "        at = time.monotonic() + {saved_after}\n"
             "        deadline.settle(lambda: {words!r}, lambda: time.monotonic() > at)\n"
             "{then}"
             "    signal.signal(signal.SIGTERM, stop)\n"
             "    print('ready', flush=True)\n"
             "    while True:\n"
             "        time.sleep(60)\n")
_BLOCKS_ON = ""  # Stays blocked, as TensorFlow's session close can after the save.
_ENDS = "        raise SystemExit(143)\n"


@pytest.mark.timeout(60)
def test_bounded_settled_task_blocked_in_close_ends_soon_with_its_stop_line():
    """A task that stopped on the signal and saved, then blocks, ends ``SETTLED_SECONDS``
    later with the line of its stop, long before the bound."""
    words = "SIGTERM: stopped training at step 7; saved checkpoint m"
    exit_code, seconds, stderr = _run_signalled(
        _SETTLING.format(saved_after=0, words=words, then=_BLOCKS_ON))
    assert exit_code == 128 + signal.SIGTERM
    assert stop_deadline.SETTLED_SECONDS <= seconds < 10
    assert stderr.strip() == (
        f"prog: {words} (run again with the same --model-dir to resume; ended "
        f"{stop_deadline.SETTLED_SECONDS} s into TensorFlow's session close, which can "
        "block after the save)")


@pytest.mark.timeout(60)
def test_bounded_settled_chief_waits_for_its_checkpoint_before_the_close_counts():
    """A chief settles before its saver has written the stop step (under multi_worker the
    saver's ``end`` comes after the training hooks): its 2 s start once ``saved()``."""
    exit_code, seconds, stderr = _run_signalled(
        _SETTLING.format(saved_after=4, words="stopped", then=_BLOCKS_ON))
    assert exit_code == 128 + signal.SIGTERM
    assert 4 + stop_deadline.SETTLED_SECONDS <= seconds < 15
    assert stderr.startswith("prog: stopped (run again with the same --model-dir")


@pytest.mark.timeout(60)
def test_bounded_settled_task_that_ends_by_itself_prints_nothing_more():
    exit_code, seconds, stderr = _run_signalled(
        _SETTLING.format(saved_after=0, words="stopped", then=_ENDS))
    assert exit_code == 143 and seconds < stop_deadline.SETTLED_SECONDS
    assert stderr == ""


@pytest.mark.timeout(60)
def test_bounded_signal_raised_again_by_handler_ends_quietly():
    """``PreemptionHook`` outside a session hands the signal to the previous handler by
    raising it again: the second write to the wakeup descriptor must not fail."""
    code = ("import signal, sys, time\n"
            "from estimator_dist.job import stop_deadline\n"
            "def again(signum, frame):\n"
            "    signal.signal(signum, lambda s, f: sys.exit(128 + s))\n"
            "    signal.raise_signal(signum)\n"
            "signal.signal(signal.SIGTERM, again)\n"
            "with stop_deadline.bounded('prog', bound=30):\n"
            "    print('ready', flush=True)\n"
            "    time.sleep(60)\n")
    exit_code, seconds, stderr = _run_signalled(code)
    assert exit_code == 128 + signal.SIGTERM
    assert seconds < 10
    assert stderr == ""


@pytest.mark.timeout(60)
def test_bounded_linger_while_serves_until_condition_ends(tmp_path):
    """A parameter server's way: serve on after the signal while training tasks answer
    (here: while a file exists), then exit at once, long before the bound."""
    training, told = tmp_path / "training", tmp_path / "told"
    training.touch()
    code = _BLOCKED.format(linger=f", linger_while=lambda: os.path.exists({str(training)!r})")
    code = "import os\n" + code.replace("bound=2", "bound=30").replace(
        "):\n", f") as deadline:\n    deadline.on_signal = lambda signum: open("
                f"{str(told)!r} + str(signum), 'w').close()\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)
    try:
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(signal.SIGINT)
        time.sleep(2)
        assert process.poll() is None  # Still serving, having told the trainers at once,
        assert os.path.exists(f"{told}{int(signal.SIGINT)}")
        training.unlink()
        sent = time.monotonic()
        _, stderr = process.communicate(timeout=20)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == 128 + signal.SIGINT
    assert time.monotonic() - sent < 5  # and gone once no training task answers.
    assert re.fullmatch(r"prog: SIGINT: stopped serving variables \d+ s after the signal "
                        r"\(no training task answers\)", stderr.strip())


@pytest.mark.timeout(120)
@pytest.mark.parametrize("blocking, handled", [("server.join()", False),
                                               ("time.sleep(60)", True)],
                         ids=["server_join", "sleep"])
def test_tensorflow_server_join_runs_no_python_signal_handler(blocking, handled):
    """Why a parameter server needs the wakeup descriptor: in ``server.join()`` the
    Python handler does not run (3 s after the signal), unlike in a sleep; Python's
    C-level handler still writes the wakeup descriptor. Exit code 7: the handler had not
    run; 8: it had."""
    code = ("import os, signal, threading, time\n"
            "import tensorflow as tf\n"
            "server = tf.distribute.Server({'ps': ['127.0.0.1:0']}, 'ps', 0, start=True)\n"
            "handled = []\n"
            "signal.signal(signal.SIGTERM, lambda s, f: handled.append(s))\n"
            "read_fd, write_fd = os.pipe()\n"
            "os.set_blocking(write_fd, False)\n"
            "signal.set_wakeup_fd(write_fd)\n"
            "def watch():\n"
            "    assert os.read(read_fd, 1) == bytes([signal.SIGTERM])\n"
            "    time.sleep(3)\n"
            "    os._exit(8 if handled else 7)\n"
            "threading.Thread(target=watch, daemon=True).start()\n"
            "main = threading.main_thread().ident\n"
            "def announce():\n"
            "    # 'ready' once the main thread is on the blocking line, and a second later:\n"
            "    # a signal sent before the call begins would run the handler in any case.\n"
            "    def outermost():\n"
            "        frame = sys._current_frames()[main]\n"
            "        while frame.f_back is not None:\n"
            "            frame = frame.f_back\n"
            "        return frame\n"
            "    while outermost().f_lineno != BLOCKING_LINE:\n"
            "        time.sleep(0.05)\n"
            "    time.sleep(1)\n"
            "    print('ready', flush=True)\n"
            "threading.Thread(target=announce, daemon=True).start()\n"
            f"{blocking}\n")
    code = "import sys\n" + code
    code = code.replace("BLOCKING_LINE", str(code.count("\n")))
    exit_code, _, stderr = _run_signalled(code, timeout=60)
    assert exit_code == (8 if handled else 7), stderr[-2000:]
