"""SIGTERM and SIGINT save the current step, stop with one line, and the next run resumes.

The CLI runs are real processes signalled mid-training (after the step-0 checkpoint, the
only periodic save they make: the default is one every 10 minutes); the library hook runs
in a TF1-style program (v2 behaviour off, an input_fn that ignores input_context).
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import weakref

import pytest
import tensorflow as tf

from estimator_dist.job.stop_deadline import WRITES_NO_CHECKPOINTS
from estimator_dist.hooks import preemption
from estimator_dist.hooks.preemption import PreemptionHook
from tests.support import REPO_ROOT


_SAVE_SECONDS = 30  # A signalled run must have saved and exited within this.
_LONG_RUN = ["--max-steps", "1000000", "--no-export"]
_STOPPED = (r"(?P<signal>SIG\w+): stopped training at step (?P<step>\d+); "
            r"(saved checkpoint (?P<checkpoint>\S+)|the chief saves the checkpoint)")
# A task still in TensorFlow's session close 2 s after it saved ends then.
_RESUME_OR_SETTLED = (r" \(run again with the same --model-dir to resume(; ended \d+ s into "
                      r"TensorFlow's session close, which can block after the save)?\)")


def _env():
    env = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    return {**env, "PYTHONPATH": REPO_ROOT}


def _start(args, log_path):
    with open(log_path, "w") as log:
        return subprocess.Popen([sys.executable, "-m", *args], stdout=log,
                                stderr=subprocess.STDOUT, cwd=REPO_ROOT, env=_env())


def _signal_mid_training(process, model_dir, signum):
    """Waits for training to start (the step-0 checkpoint) and run on; sends ``signum``;
    returns (exit code, seconds from the signal to the exit)."""
    deadline = time.monotonic() + 240
    try:
        while not os.path.exists(os.path.join(model_dir, "model.ckpt-0.index")):
            assert process.poll() is None, "the run ended before it trained"
            assert time.monotonic() < deadline, "training never started"
            time.sleep(0.5)
        time.sleep(5)
        process.send_signal(signum)
        sent = time.monotonic()
        code = process.wait(timeout=120)
        return code, time.monotonic() - sent
    finally:
        process.kill()
        process.wait()


def _checkpoint_steps(model_dir):
    state = tf.train.get_checkpoint_state(model_dir)
    return [int(path.rsplit("-", 1)[1]) for path in state.all_model_checkpoint_paths]


@pytest.mark.alone
@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_train_signal_saves_current_step_and_rerun_resumes(tmp_path, signum):
    model_dir = str(tmp_path / "model")
    log = tmp_path / "train.log"
    process = _start(["estimator_dist.train", "--model-dir", model_dir, *_LONG_RUN], log)
    code, seconds = _signal_mid_training(process, model_dir, signum)
    text = log.read_text()
    assert code == 128 + signum, text[-2000:]
    assert seconds < _SAVE_SECONDS
    assert "Traceback" not in text
    errors = [line for line in text.splitlines() if "error" in line or "stopped" in line]
    assert len(errors) == 1, errors
    stopped = re.fullmatch(r"python -m estimator_dist\.train: " + _STOPPED + _RESUME_OR_SETTLED,
                           errors[0])
    assert stopped and stopped["signal"] == signum.name, errors[0]
    step = int(stopped["step"])
    assert stopped["checkpoint"] == os.path.join(model_dir, f"model.ckpt-{step}")
    assert _checkpoint_steps(model_dir) == [0, step] and step > 0

    rerun = subprocess.run([sys.executable, "-m", "estimator_dist.train", "--model-dir",
                            model_dir, "--max-steps", str(step + 5), "--no-export"],
                           capture_output=True, text=True, timeout=240, cwd=REPO_ROOT,
                           env=_env())
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert f"Resuming dense at step {step} to step {step + 5}" in rerun.stdout
    assert _checkpoint_steps(model_dir)[-1] == step + 5


@pytest.mark.alone
@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.both_ends
def test_launch_two_workers_sigterm_stops_both_and_chief_saves(tmp_path):
    model_dir = str(tmp_path / "model")
    log = tmp_path / "launch.log"
    process = _start(["estimator_dist.launch", "--workers", "2", "--", sys.executable, "-m",
                      "estimator_dist.train", "--strategy", "multi_worker", "--model-dir",
                      model_dir, *_LONG_RUN], log)
    code, seconds = _signal_mid_training(process, model_dir, signal.SIGTERM)
    text = log.read_text()
    assert code == 128 + signal.SIGTERM, text[-3000:]
    assert seconds < _SAVE_SECONDS
    assert "Traceback" not in text
    stopped = {int(m["task"]): m for m in re.finditer(r"\[worker (?P<task>\d)\] [^\n]*?"
                                                      + _STOPPED + _RESUME_OR_SETTLED, text)}
    assert 0 in stopped, text[-3000:]
    step = int(stopped[0]["step"])
    assert step > 0 and stopped[0]["checkpoint"] == os.path.join(model_dir,
                                                                 f"model.ckpt-{step}")
    if 1 in stopped:  # Both stopped after the same step, and only the chief saved it.
        assert int(stopped[1]["step"]) == step and stopped[1]["checkpoint"] is None
    else:  # Worker 1 can stay in TensorFlow once its peer has gone: the bound ends it.
        assert re.search(r"^\[worker 1\] python -m estimator_dist\.train: SIGTERM: stopped "
                         r"\d+ s after the signal \(.*" + re.escape(WRITES_NO_CHECKPOINTS)
                         + r"\)$", text, re.M), text[-3000:]
    assert _checkpoint_steps(model_dir) == [0, step]


@pytest.mark.slow
@pytest.mark.multi_process
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "sigint"])
def test_preemption_hook_tf1_behaviour_saves_and_train_resumes(tmp_path, signum):
    model_dir = str(tmp_path / "model")
    result = subprocess.run([sys.executable, "-m", "tests.programs.preemption_job",
                             model_dir, signum.name], capture_output=True, text=True,
                            timeout=240, cwd=REPO_ROOT, env=_env())
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout.splitlines()[-1])
    stopped = report["stopped"]
    assert stopped["signum"] == signum
    step = stopped["step"]
    assert step >= 30  # The job signals itself at step 30; the hook stops at the next.
    assert stopped["checkpoint"] == report["latest"] == os.path.join(model_dir,
                                                                     f"model.ckpt-{step}")
    assert re.fullmatch(_STOPPED, stopped["message"])
    assert report["handler_restored"]
    assert report["start_steps"] == [0, step]  # The second train() restored that step.
    assert report["final"] == os.path.join(model_dir, f"model.ckpt-{step + 5}")


# --- Which signals the hook keeps, and which it passes on ----------------------------------


class _Recorder:
    """A signal handler that records the signals it gets."""

    def __init__(self):
        self.calls = []

    def __call__(self, signum, frame):
        self.calls.append(signum)


@pytest.fixture
def usr1_handler():
    """SIGUSR1 goes to a recorder: the handler the hook finds, and passes signals on to."""
    recorder = _Recorder()
    previous = signal.signal(signal.SIGUSR1, recorder)
    yield recorder
    signal.signal(signal.SIGUSR1, previous)


def _running_hook():
    """A hook on SIGUSR1 whose session has started; returns (hook, the session's coordinator)."""
    hook = PreemptionHook(signals=[signal.SIGUSR1])
    coordinator = tf.compat.v1.train.Coordinator()
    with tf.Graph().as_default():
        hook.begin()
    hook.after_create_session(None, coordinator)
    return hook, coordinator


def _stop_requested(hook):
    """Whether the hook asks the session to stop after a step."""
    context = tf.compat.v1.train.SessionRunContext(original_args=None, session=None)
    hook.after_run(context, None)
    return context.stop_requested


def test_preemption_hook_keeps_the_first_signal_passes_on_the_second(usr1_handler):
    hook, _ = _running_hook()
    signal.raise_signal(signal.SIGUSR1)
    assert usr1_handler.calls == [] and _stop_requested(hook)
    signal.raise_signal(signal.SIGUSR1)  # Waiting for the step: a second one goes through.
    assert usr1_handler.calls == [signal.SIGUSR1]
    assert signal.getsignal(signal.SIGUSR1) is usr1_handler  # The previous one is back.


def test_preemption_hook_without_signal_keeps_training(usr1_handler):
    hook, _ = _running_hook()
    assert not _stop_requested(hook)


def test_preemption_hook_after_failed_session_passes_signals_on(usr1_handler):
    hook, coordinator = _running_hook()
    coordinator.request_stop()  # What closing a session that failed does; end() never runs.
    signal.raise_signal(signal.SIGUSR1)
    assert usr1_handler.calls == [signal.SIGUSR1] and not _stop_requested(hook)


@pytest.fixture
def no_running_hooks(monkeypatch):
    """``stop_training`` sees only the hooks a test starts."""
    monkeypatch.setattr(preemption, "_RUNNING", weakref.WeakSet())
    monkeypatch.setattr(preemption, "_PENDING", [])


def test_stop_training_from_another_thread_stops_after_the_step(usr1_handler,
                                                                 no_running_hooks):
    """A parameter server's word (``hooks.ps_watch``'s thread) stops as a signal would."""
    hook, _ = _running_hook()
    thread = threading.Thread(target=preemption.stop_training, args=(signal.SIGTERM,))
    thread.start()
    thread.join()
    assert _stop_requested(hook) and usr1_handler.calls == []


def test_stop_training_while_no_session_runs_stops_the_next_after_its_first_step(
        usr1_handler, no_running_hooks):
    """A worker still creating its session when its ps stops."""
    preemption.stop_training(signal.SIGTERM)
    hook, _ = _running_hook()
    assert _stop_requested(hook)
    later, _ = _running_hook()
    assert not _stop_requested(later)  # Taken once.


def test_preemption_hook_sync_every_runs_not_positive_raises():
    with pytest.raises(ValueError, match=r"sync_every_runs must be a positive int\. "
                                         r"Received: sync_every_runs=0"):
        PreemptionHook(sync_every_runs=0)


class _Saver:
    def __init__(self, *last_checkpoints):
        self.last_checkpoints = list(last_checkpoints)


@pytest.mark.parametrize("step,savers,named", [
    (7, [_Saver("m/model.ckpt-3", "m/model.ckpt-7")], "m/model.ckpt-7"),
    # Parameter server training: another worker stepped between the read and the save.
    (7, [_Saver("m/model.ckpt-9")], "m/model.ckpt-9"),
    (7, [_Saver("m/model.ckpt-3")], None),  # A periodic save before the stop is not it.
    (7, [_Saver(), _Saver("m/other")], None),  # No save, or a user's saver without steps.
], ids=["stop_step", "later_step", "earlier_step", "none"])
def test_preempted_names_the_checkpoint_saved_at_or_after_its_step(step, savers, named):
    preempted = preemption.Preempted(signal.SIGTERM, step, savers)
    assert preempted.checkpoint == named
    assert str(preempted).endswith(f"saved checkpoint {named}" if named else
                                   "the chief saves the checkpoint")
