"""How a parameter server told to stop tells its chief and workers, so that they stop
after their step and the chief saves it while the ps still serves the variables.

A ps spends its life in TensorFlow's ``server.join()``: nothing of it reaches the other
tasks but its answers to their calls, and once it is gone they can save nothing (the
variables lived there). So on SIGTERM or SIGINT the train command's ps writes ``FILE``
into the model dir (``announce``), then serves while the chief or a worker still answers
(``job.stop_deadline``). The ps watch of each chief and worker (``hooks.ps_watch``) reads
the file once a second while it trains: one written since that process started (by the
clock) or changed since its training began stops training as the signal itself would
(``hooks.preemption``), the chief saving the step it stopped at. The launcher reads it
too, to name the ps whose signal stopped the job (``supervisor.supervise``).

A model dir on a file system of TensorFlow's own (``gs://``, ``hdfs://``) is not written:
the ps's signal is read in a thread that must not block, and the trainers then end as
when the ps is gone, without the save.
"""
from __future__ import annotations

import os
import re
import time

FILE = ".estimator-dist-ps-stop"
_WORDS = re.compile(r"^(?P<ps>ps \d+) got (?P<signal>SIG[A-Z]+)$")


def _path(model_dir: str | None) -> str | None:
    if not model_dir or "://" in model_dir:
        return None
    return os.path.join(model_dir, FILE)


def announce(model_dir: str | None, words: str) -> None:
    """Tells the trainers of ``model_dir`` that the ps stops: ``words`` say why (e.g.
    ``ps 0 got SIGTERM``). An error writing it is left unsaid: the trainers then end as
    when the ps is gone."""
    path = _path(model_dir)
    if path is None:
        return
    try:
        with open(path, "w", encoding="utf-8") as file:
            file.write(f"{words}\n{os.getpid()} {time.time()}\n")
    except OSError:
        pass


def state(model_dir: str | None) -> str | None:
    """The file's text now (None: there is none), to compare with an earlier read."""
    path = _path(model_dir)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def words(text: str) -> str:
    """The words an ``announce`` wrote, from the file's ``text``."""
    return text.split("\n", 1)[0]


def written_at(text: str) -> float:
    """When an ``announce`` wrote the file's ``text`` (``time.time()``; 0 if unreadable)."""
    try:
        return float(text.split("\n")[1].split()[1])
    except (IndexError, ValueError):
        return 0.0


def told(model_dir: str | None, since: float) -> tuple[str, str] | None:
    """(ps name, signal name), e.g. ("ps 0", "SIGTERM"), when the file of ``model_dir``
    was written at ``since`` (``time.time()``) or later; else None."""
    text = state(model_dir)
    if text is None or written_at(text) < since:
        return None
    found = _WORDS.match(words(text))
    return (found["ps"], found["signal"]) if found else None
