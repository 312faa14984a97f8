"""The one owner of hard exits: a process ended from a thread that is not its main one.

Library code ends no process: it raises (``errors.UsageError``, ``EnvironmentFault``,
``TaskEnd``), and the command's entry (``commands.cli.run``) turns that into the exit
code. A few guards cannot raise: the main thread an exception would have to reach is
blocked inside TensorFlow's C++ -- a collective whose peer is gone, a session's
creation, a parameter server's ``server.join()`` -- where no Python exception and no
signal handler ever runs. They end the process from a thread of their own, here:

- ``hooks.watchdog``: a multi-worker task whose training made no progress for
  ``collective_timeout`` seconds (exit code 1);
- ``hooks.ps_watch``: a parameter_server chief or worker whose ps task is gone (code 1);
- ``job.stop_deadline``: a task still running its bound after SIGTERM or SIGINT
  (``128 + signal``; entered by the train command only);
- ``distribute.rendezvous``: a cluster join that outlasts the rendezvous timeout (code 1,
  ``exit_after``).

The watchdog, the ps watch and the join's bound come with the strategies that need them
(``make_run_config("multi_worker")`` and ``"parameter_server"``): without them such a
task waits for ever, without a word.

``end(code, line)`` calls the process's handler. The default one runs what was registered
with ``before_hard_exit`` (the model dir's lock is released so; for at most
``CLEANUP_SECONDS``), flushes stdout and stderr (for at most ``FLUSH_SECONDS``: the
blocked thread may hold a stream), writes ``line`` to stderr and ends the process with
``os._exit(code)``, which runs no ``atexit`` handler and no ``finally`` block of the
blocked thread. A program that embeds the library sees each of these ends, or takes them
over, with ``set_handler``: its handler gets the code and the line in the guard's thread;
if it returns, the process runs on and that guard watches no more (a handler that ends
the process ends it through ``exit_now``, so that the cleanups run). The join's bound is
the one end no handler sees: the runtime holds the interpreter lock while it joins, so no
Python code can run, and ``faulthandler``'s watchdog (a C thread) ends the process; it
comes before the model dir's lock is taken.
"""
from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
import threading
import types
from typing import Callable, Iterator

from estimator_dist import errors

FLUSH_SECONDS = 1.0
CLEANUP_SECONDS = 2.0
JOIN_EXIT_CODE = 1  # What faulthandler's watchdog exits with.


def _flush_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # A closed or broken stream: the line still goes out, the process ends.


_cleanups: list[Callable[[], object]] = []


def before_hard_exit(cleanup: Callable[[], object]) -> Callable[[], None]:
    """Makes the default handler call ``cleanup()`` before it ends the process (a
    ``finally`` block would not run); returns the function that takes it back."""
    _cleanups.append(cleanup)
    return lambda: _cleanups.remove(cleanup) if cleanup in _cleanups else None


def _clean_up() -> None:
    for cleanup in list(_cleanups):
        try:
            cleanup()
        except Exception:  # Whatever a cleanup raises: the process ends anyway.
            continue


def _bounded(work: Callable[[], None], seconds: float, name: str) -> None:
    thread = threading.Thread(target=work, name=name, daemon=True)
    thread.start()
    thread.join(seconds)


def exit_now(code: int, line: str) -> None:
    """The default handler: runs the ``before_hard_exit`` cleanups, flushes what Python
    buffered, writes ``line`` to stderr and ends the process with ``code`` at once."""
    _bounded(_clean_up, CLEANUP_SECONDS, "exit-cleanup")
    _bounded(_flush_streams, FLUSH_SECONDS, "exit-flush")
    os.write(2, (line + "\n").encode())  # Not sys.stderr: a program may have replaced it.
    os._exit(code)  # The main thread is blocked inside TensorFlow: see the docstring.


# ``handler(code, line)``: takes a hard exit (``set_handler``).
Handler = Callable[[int, str], object]
_handler: Handler = exit_now


def set_handler(handler: Handler) -> Handler:
    """Makes ``handler(code, line)`` take every hard exit of the process; returns the one it
    replaces (``exit_now`` by default)."""
    global _handler  # The process's one handler.
    previous, _handler = _handler, handler
    return previous


def end(code: int, line: str) -> None:
    """Ends the process with exit ``code`` and one ``line`` on stderr, through the handler
    (``set_handler``). Called from a guard's own thread; returns only when a handler of
    the program's own does."""
    _handler(code, line)


@contextlib.contextmanager
def exit_after(seconds: float) -> Iterator[None]:
    """Ends the process with ``JOIN_EXIT_CODE`` if this block runs for ``seconds``, even
    while another thread holds the interpreter lock (``faulthandler``'s C watchdog: no
    handler is called and nothing is printed, so say what would happen before)."""
    with open(os.devnull, "w", encoding="utf-8") as devnull:
        faulthandler.dump_traceback_later(seconds, exit=True, file=devnull)
        try:
            yield
        finally:
            faulthandler.cancel_dump_traceback_later()


_uncaught_hook: list[bool] = []  # [True] once ``uncaught_task_end_in_one_line`` ran.


def uncaught_task_end_in_one_line() -> None:
    """Makes a ``TaskEnd`` that nothing catches end the process as the CLI ends it: its one
    line on stderr and its exit code, no traceback (idempotent).

    A program that calls the library itself has no ``commands.cli.run`` around it, and
    Python prints the traceback of any uncaught exception but ``SystemExit``; a task its
    launcher stops while it waits for a failed peer would bury the peer's reason under
    it. The hook is chained to ``sys.excepthook`` when a ``TaskEnd`` is raised; a
    ``SystemExit`` raised in ``sys.excepthook`` ends the process with its code.
    """
    if _uncaught_hook:
        return
    _uncaught_hook.append(True)
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException,
             traceback: types.TracebackType | None) -> None:
        if isinstance(value, errors.TaskEnd):
            print(value, file=sys.stderr, flush=True)
            raise SystemExit(value.exit_code)
        previous(kind, value, traceback)

    sys.excepthook = hook
