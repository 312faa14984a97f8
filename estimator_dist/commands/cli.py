"""What every ``python -m estimator_dist.*`` command shares: its parser, ``run``, the one
entry that owns the exit codes, and ``exit_with``, the one way a command ends its process.

Every command has one shape: ``NAME_parser(subparsers=None)`` (built by
``command_parser``), ``NAME_command(args)`` returning the exit code, and
``main(argv=None)`` calling ``run``. A bad flag value or a ``UsageError`` from the
command is one line on stderr, ``PROG: error: ...``, and exit code 2, with no traceback;
an ``EnvironmentFault`` (the machine's fault, e.g. a full disk) is one line and exit code
1; SIGINT (and SIGTERM where a command turns it into ``Terminated``) is one line and
``128 + signal``, as is a ``TaskEnd`` (a signal the library turned into one, e.g. while
waiting for peers) and an error raised while such a stop unwinds; a closed stdout
(``| head``) ends the command quietly.

``python -m estimator_dist.NAME`` and the ``estimator-dist-NAME`` console script both call
``estimator_dist.NAME.script``, which ends the process through ``exit_with``.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import os
import signal
import sys
import threading
import traceback
from typing import Any, Callable, Iterator, NoReturn, Sequence

from estimator_dist.errors import EnvironmentFault, TaskEnd, UsageError, nearest_hint


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr and exit code 2.

    An unknown flag gets the nearest known one as a hint.
    """

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            flags = [w for w in message.split()[2:] if w.startswith("--")]
            options = [o for o in self._option_string_actions if o.startswith("--")]
            message += nearest_hint(flags[0].split("=")[0], options) if flags else ""
        self.exit(2, f"{self.prog}: error: {message}\n")


def _int_at_least(minimum: int, rule: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"must be a {rule} int. Received: {text!r}")
        return value

    return parse


positive_int = _int_at_least(1, "positive")
non_negative_int = _int_at_least(0, "non-negative")


_AGAIN_SECONDS = 0.01


class Terminated(BaseException):
    """Raised by a command's SIGTERM handler; ``run`` ends the command in one line."""


def _raise_terminated(signum: int, frame: Any) -> NoReturn:
    """A SIGTERM handler that raises ``Terminated``."""
    del signum, frame  # Unused.
    raise Terminated()


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """In the block SIGTERM raises ``Terminated`` in the main thread, for ``run`` to end
    the command in one line.

    Python runs the handler between any two bytecodes of the main thread, also inside a
    weakref callback or a ``__del__`` (TensorFlow's caches drop entries that way), where
    an exception only gets reported ("Exception ignored in ...") and the code goes on. Such
    a ``Terminated`` is not reported: the signal is sent again ``_AGAIN_SECONDS`` later,
    from a thread, to land outside (sent at once, it would land in the report itself).
    """
    previous_handler = signal.signal(signal.SIGTERM, _raise_terminated)
    previous_hook = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, Terminated):
            again = threading.Timer(_AGAIN_SECONDS, os.kill, (os.getpid(), signal.SIGTERM))
            again.daemon = True
            again.start()
        else:
            previous_hook(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous_hook
        signal.signal(signal.SIGTERM, previous_handler)


def command_parser(name: str, description: str, subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of command ``name``: standalone (``python -m estimator_dist.NAME``), or
    added to ``subparsers``."""
    if subparsers is None:
        return OneLineParser(prog=f"python -m estimator_dist.{name}", description=description)
    return subparsers.add_parser(name, description=description)


def run(parser: argparse.ArgumentParser, command: Callable[[argparse.Namespace], int],
        argv: Sequence[str] | None = None, *, interrupted_note: str | None = None) -> int:
    """Parses ``argv``, runs ``command(args)`` and returns the process exit code.

    With ``--verbose`` (where a command has it) a user error is raised with its traceback.
    ``interrupted_note`` follows the one line printed when a signal interrupts the command.
    """
    args = parser.parse_args(argv)
    try:
        return command(args)
    except (UsageError, EnvironmentFault) as error:
        if getattr(args, "verbose", False):
            raise
        print(f"{parser.prog}: error: {error}", file=sys.stderr)
        return 1 if isinstance(error, EnvironmentFault) else 2
    except BrokenPipeError:
        return _reader_left()
    except BaseException as error:
        unwound = _unwound_by_stop(error)
        if not unwound:
            raise
        _quiet_after_stop(unwound)
        return _stopped(parser.prog, unwound[-1], interrupted_note)


_STOPS = (KeyboardInterrupt, Terminated, TaskEnd)


def _unwound_by_stop(error: BaseException) -> list[BaseException]:
    """``error`` and its ``__context__`` chain down to the stop (SIGINT, SIGTERM, a
    ``TaskEnd``) it is or was raised while unwinding, the stop last; empty if no stop is
    behind it.

    A signal lands between any two bytecodes: e.g. inside a context manager's
    ``__enter__`` after its generator entered the scope, so the ``with`` never exits it and
    an outer scope's exit finds the scopes out of order and raises its own error (TensorFlow's
    ``Graph.device``: "Exiting device scope without proper scope nesting"). That error is
    the stop's consequence; its ``__context__`` is the stop.
    """
    chain: list[BaseException] = []
    seen: BaseException | None = error
    while seen is not None:
        chain.append(seen)
        if isinstance(seen, _STOPS):
            return chain
        seen = seen.__context__
    return []


def _quiet_after_stop(unwound: list[BaseException]) -> None:
    """Finalizes the frames the ``unwound`` exceptions passed through, reporting nothing
    they raise.

    A context manager's generator that the stop left inside its scope closes when its
    frame goes, and its ``finally`` may fail on the scopes unwound before it ("Exception
    ignored in: <generator object Graph.device ...>", an ``IndexError``): news of nothing
    but the stop. (A frame held in a reference cycle is not freed here; ``exit_with``'s
    ``gc.freeze`` leaves it unfinalized until the process ends.)
    """
    previous_hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        for exception in unwound:
            traceback.clear_frames(exception.__traceback__)
    finally:
        sys.unraisablehook = previous_hook


def _stopped(prog: str, stop: BaseException, interrupted_note: str | None) -> int:
    """Prints the stop's one line and returns its exit code."""
    if isinstance(stop, TaskEnd):
        print(f"{prog}: {stop}", file=sys.stderr)
        return stop.exit_code
    name = "SIGTERM" if isinstance(stop, Terminated) else "SIGINT"
    note = f"; {interrupted_note}" if interrupted_note else ""
    print(f"{prog}: interrupted by {name}{note}", file=sys.stderr)
    return 128 + signal.Signals[name]


def _reader_left() -> int:
    """Whoever read stdout left (e.g. ``| head``): the rest goes nowhere, without a
    traceback; the exit code is 1."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1


def _code_of(main: Callable[[], int]) -> Any:
    """``main()``'s exit code; argparse's ``--help`` and usage errors end it with
    ``SystemExit``, whose code is the exit code alike."""
    try:
        return main()
    except SystemExit as stop:
        return stop.code


def exit_with(main: Callable[[], int]) -> NoReturn:
    """Runs a command's ``main()`` and ends the process with its exit code.

    stdout is flushed here, where a reader that left still ends the command quietly. The
    interpreter's last garbage collection at exit is skipped (``gc.freeze``): it walks
    every object TensorFlow made, seconds on a busy machine (docs/benchmarks.md), and
    nothing needs it once the command has returned, having saved and flushed what it
    writes.
    """
    try:
        code = _code_of(main)
        sys.stdout.flush()
    except BrokenPipeError:
        code = _reader_left()
    gc.freeze()
    sys.exit(code)
