"""After SIGTERM or SIGINT every task of a cluster ends within a bound, whatever it waits in.

Python runs a signal handler in the main thread, between two bytecodes. A task blocked
inside TensorFlow's C++ never gets there: a parameter server spends its life in
``server.join()``, and a worker may wait in a session's creation or in a step whose peer
is gone. Kubernetes sends SIGKILL 30 s after SIGTERM, so such a task must end by itself.

``bounded`` gives the process a wakeup file descriptor (``signal.set_wakeup_fd``): Python's
C-level handler writes the signal's number there from whatever thread the signal lands
in, and a daemon thread reads it. Then:

- a parameter server (``linger_while`` given) first tells its chief and workers
  (``Deadline.on_signal``: the train command's writes ``ps_stop``'s file, which makes
  them stop after their step), then keeps serving while the chief or a worker still
  answers on its port, so that they finish the step and the chief saves the variables
  it holds, and exits ``128 + signal`` once none answers, or after the bound;
- any other task has until the bound to end through its own handler (``PreemptionHook``
  saves the step); still running then, it exits ``128 + signal`` with one line that says
  what it leaves saved (``Deadline.saved``): the model dir's newest checkpoint, which
  may be the one the chief saved at the signal, or that the task writes none.

Both ends go through ``process_exit.end``, from the watcher thread. The train command
enters ``bounded``; a program that embeds the library enters it only if it wants it.
"""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

from estimator_dist import checkpoint_step, process_exit

if TYPE_CHECKING:
    from estimator_dist.distribute.cluster import TFConfig

# Kubernetes' default grace period is 30 s; a task ends within 20 s of the signal.
BOUND_SECONDS = 15
# Once a task has stopped and saved what it owns, the time left to TensorFlow's session
# close, which can block after the save (docs/cluster.md).
SETTLED_SECONDS = 2
_PROBE_SECONDS = 0.2
_SIGNALS = (signal.SIGTERM, signal.SIGINT)
WRITES_NO_CHECKPOINTS = "this task writes no checkpoints; the chief does"


class Deadline:
    """What ``bounded`` yields: what the line printed at the bound says is saved, and
    whether the task has settled (``settle``).

    Attributes:
      saved: None, or a callable returning those words, e.g. ``newest_checkpoint(dir)``
        or ``WRITES_NO_CHECKPOINTS``. It is called at the bound, so it sees the
        checkpoint saved after the signal.
      stopped, has_saved: the callables given to ``settle``.
      on_signal: None, or a callable run with the signal's number in the watcher thread
        as the signal arrives, e.g. a parameter server telling its trainers
        (``ps_stop.announce``); what it raises is left unsaid.
    """

    def __init__(self) -> None:
        self.saved: Callable[[], str | None] | None = None
        self.on_signal: Callable[[int], None] | None = None
        self._settled = threading.Event()
        self.stopped: Any  # ``stopped()`` once settled.
        self.has_saved: Callable[[], bool] | None
        self.stopped = self.has_saved = None

    def settle(self, stopped: Callable[[], str], saved: Callable[[], bool] | None = None) -> None:
        """The task stopped on the signal: ``stopped()`` gives the words of its stop (e.g.
        ``str(Preempted)``), and ``saved()`` (None: nothing to save) tells once it has
        saved what it owns. From then on what remains is TensorFlow's close."""
        self.stopped, self.has_saved = stopped, saved
        self._settled.set()

    def wait_settled(self, seconds: float) -> bool:
        """Whether the task settled within ``seconds``."""
        return self._settled.wait(seconds)

    def describe_saved(self) -> str | None:
        """The words of ``saved``; None without them, or when they cannot be had."""
        try:
            return self.saved() if self.saved else None
        except Exception:  # Whatever the caller's function raises.
            return None  # The line must still be printed, and the process ended.


def newest_checkpoint(model_dir: str) -> Callable[[], str]:
    """A callable for ``Deadline.saved``: the step of ``model_dir``'s newest checkpoint,
    read from TensorFlow's ``checkpoint`` file at the moment it is called."""
    def words() -> str:
        step = checkpoint_step.newest_step(model_dir)
        if step is None:  # A bucket, or a file this process cannot read.
            return f"the checkpoints saved are in {model_dir}"
        if not os.path.exists(os.path.join(model_dir, "checkpoint")):
            return f"{model_dir} holds no checkpoint yet"
        return f"the newest checkpoint in {model_dir} is step {step}"
    return words


def _keep_serving(signum: int, frame: Any) -> None:
    """A parameter server's Python handler: the watcher thread acts on the signal."""
    del signum, frame  # Unused.


def _answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=_PROBE_SECONDS):
            return True
    except OSError:
        return False


def training_tasks_answer(tf_config: TFConfig) -> Callable[[], bool]:
    """A ``linger_while`` for a parameter server: whether the chief or a worker of
    ``tf_config`` (a ``cluster.TFConfig``) still answers on its port."""
    addresses = [address for task_type in ("chief", "master", "worker")
                 for address in tf_config.cluster.get(task_type, [])]
    return lambda: any(_answers(address) for address in addresses)


def _end(prog: str, signum: int, started: float, what: str, why: str) -> None:
    """Ends the process (``process_exit.end``: the main thread may be blocked inside
    TensorFlow, where no exception reaches it)."""
    process_exit.end(128 + signum, f"{prog}: {signal.Signals(signum).name}: {what} "
                                   f"{time.monotonic() - started:.0f} s after the signal ({why})")


def _bound_stop(prog: str, signum: int, started: float, bound: float, left: threading.Event,
                deadline: Deadline) -> None:
    """Waits for the context to be ``left``: at most ``bound`` seconds after the signal,
    and ``SETTLED_SECONDS`` once the task has settled (stopped and saved)."""
    while not left.is_set():
        remaining = started + bound - time.monotonic()
        if remaining <= 0:
            saved = deadline.describe_saved()
            _end(prog, signum, started, "stopped",
                 "still blocked in TensorFlow" + (f"; {saved}" if saved else ""))
            return  # The program's own handler (process_exit.set_handler) kept the process.
        if deadline.wait_settled(min(remaining, _PROBE_SECONDS)) and _saved(deadline):
            if not left.wait(min(SETTLED_SECONDS, max(started + bound - time.monotonic(),
                                                      0))):
                process_exit.end(128 + signum, (
                    f"{prog}: {deadline.stopped()} (run again with the same --model-dir to "
                    f"resume; ended {SETTLED_SECONDS} s into TensorFlow's session close, "
                    "which can block after the save)"))
            return


def _saved(deadline: Deadline) -> bool:
    """Whether a settled task has saved what it owns (False when that cannot be read)."""
    try:
        return deadline.has_saved is None or deadline.has_saved()
    except Exception:  # Whatever the caller's function raises.
        return False  # The bound still ends it.


def _tell(deadline: Deadline, signum: int) -> None:
    """Runs ``deadline.on_signal``, whatever it raises (the bound must still hold)."""
    try:
        if deadline.on_signal is not None:
            deadline.on_signal(signum)
    except Exception:  # Whatever the caller's function raises.
        pass


def _wait_for_signal(read_fd: int) -> int | None:
    """The first SIGTERM or SIGINT written to ``read_fd``; None once it is closed."""
    while True:
        data = os.read(read_fd, 64)
        if not data:
            return None
        received = [s for s in data if s in _SIGNALS]
        if received:
            return received[0]


def _watch(read_fd: int, prog: str, bound: float, linger_while: Callable[[], bool] | None,
           left: threading.Event, deadline: Deadline) -> None:
    """Ends the process ``bound`` seconds after the first signal (a parameter server: once
    ``linger_while()`` fails), unless the context is ``left`` first. The read end stays
    open after a signal: a handler may raise the signal again (``PreemptionHook`` does,
    outside a session), and Python reports a write to a closed pipe."""
    signum = _wait_for_signal(read_fd)
    if signum is None:
        os.close(read_fd)
        return
    started = time.monotonic()
    _tell(deadline, signum)
    if linger_while is None:
        _bound_stop(prog, signum, started, bound, left, deadline)
        return
    while time.monotonic() < started + bound and linger_while():
        if left.wait(_PROBE_SECONDS):
            return
    running = time.monotonic() >= started + bound
    _end(prog, signum, started, "stopped serving variables",
         "training tasks still running" if running else "no training task answers")


@contextlib.contextmanager
def bounded(prog: str, *, bound: float = BOUND_SECONDS,
            linger_while: Callable[[], bool] | None = None) -> Iterator[Deadline]:
    """Within this context (entered in the main thread) the process ends within ``bound``
    seconds of SIGTERM or SIGINT. With ``linger_while`` (a parameter server) both signals
    get a handler that does nothing, and the process serves while ``linger_while()``
    holds; otherwise they keep their handlers, which get ``bound`` seconds to end it.

    Yields:
      a ``Deadline``: set its ``saved`` once the task knows what it saves.
    """
    previous = {s: signal.signal(s, _keep_serving) for s in _SIGNALS} if linger_while else {}
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    left = threading.Event()
    deadline = Deadline()
    threading.Thread(target=_watch, args=(read_fd, prog, bound, linger_while, left, deadline),
                     daemon=True, name="stop_deadline").start()
    try:
        yield deadline
    finally:
        left.set()
        signal.set_wakeup_fd(previous_fd)
        os.close(write_fd)  # Without a signal, the watcher reads the end of the pipe.
        for signum, handler in previous.items():
            signal.signal(signum, handler)
