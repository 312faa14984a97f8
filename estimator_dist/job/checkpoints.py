"""Which checkpoint a resume restores, and the fallback past a damaged one.

Estimator restores ``tf.train.latest_checkpoint(model_dir)``: the checkpoint that the
``checkpoint`` state file names. TensorFlow reads a garbage state file as "no checkpoint"
(and a new run then writes ``model.ckpt-0`` over the old one), fails with a long
traceback on an empty or binary state file, one that names a missing checkpoint, or a
truncated checkpoint, and follows a state file's path out of the model dir (``../other``
or an absolute path elsewhere): it would restore, and train on, another run's weights.

A resume here restores the newest intact checkpoint on disk instead: the newest whose
index and data files read in full, looked at newest first. When that is not the one the
state file names, or newer checkpoints are damaged, ``fall_back`` moves the damaged
checkpoints' files and the old state file, byte for byte, into ``MODEL_DIR/damaged-TIME/``
(so training on never writes over them) and writes a new state file naming the intact
checkpoint. No checkpoint file is rewritten or deleted. A model dir with checkpoint files
but none intact is refused.

A state file that is empty, not text, unreadable, or names any path outside the model
dir is never followed: it counts as damaged, and the resume falls back past it the same
way, with one warning line naming it. ``migrate`` converts the same checkpoint a resume
would restore, and moves nothing (it only reads the model dir).
"""
from __future__ import annotations

import dataclasses
import datetime
import glob
import os
import re
from typing import cast

import tensorflow as tf

from estimator_dist import checkpoint_step
from estimator_dist.errors import UsageError

STATE_FILE = "checkpoint"
_PREFIX = re.compile(r"^(model\.ckpt-\d+)\.(index|meta|data-\d+-of-\d+)$")


@dataclasses.dataclass(frozen=True)
class Resume:
    """Where a resume starts. ``path`` None: a fresh start (no checkpoint at all)."""

    path: str | None = None  # The intact checkpoint prefix to restore.
    step: int = 0
    # (prefix, why) of damaged or missing checkpoints newer than ``path``.
    stale: tuple[tuple[str, str], ...] = ()
    named: str | None = None  # What the state file names ("" when it cannot be read).
    state_fault: str | None = None  # Why the state file is not followed, e.g. "is empty".

    @property
    def needs_fallback(self) -> bool:
        return self.path is not None and (bool(self.stale) or self.named != self.path)


def _on_disk(model_dir: str) -> dict[int, str]:
    """step -> prefix of every ``model.ckpt-N`` with any file in ``model_dir``."""
    found = {}
    for name in os.listdir(model_dir):
        match = _PREFIX.match(name)
        if match:
            prefix = os.path.join(model_dir, match.group(1))
            found[checkpoint_step.step_of(prefix)] = prefix
    return found


_STATE_BYTES = 1 << 20  # Far above any real state file (one line per kept checkpoint).


def _state_paths(model_dir: str) -> str:
    """The paths the state file names, or raises ValueError saying why it is not used."""
    state_path = os.path.join(model_dir, STATE_FILE)
    try:
        if not os.path.isfile(state_path):
            raise ValueError("is not a regular file")
        with open(state_path, "rb") as file:
            raw = file.read(_STATE_BYTES + 1)
    except OSError as error:
        raise ValueError(f"cannot be read ({error.strerror})") from None
    if not raw.strip():
        raise ValueError("is empty")
    if len(raw) > _STATE_BYTES or b"\0" in raw:
        raise ValueError("is not a text state file")
    try:
        raw.decode("utf-8")
        state = tf.train.get_checkpoint_state(model_dir)  # None when it does not parse.
    except (UnicodeDecodeError, ValueError, tf.errors.OpError):
        state = None
    if state is None or not state.model_checkpoint_path:
        raise ValueError("does not parse")
    # TensorFlow joins relative paths to model_dir: what resolves elsewhere leaves it.
    home = os.path.realpath(model_dir)
    for named in [state.model_checkpoint_path, *state.all_model_checkpoint_paths]:
        if os.path.dirname(os.path.realpath(named)) != home:
            raise ValueError(f"names {named!r}, outside the model dir")
    return state.model_checkpoint_path


def _named(model_dir: str) -> tuple[str | None, str | None]:
    """(The prefix the state file names, or "" for one not followed; None for none, and
    why it is not followed)."""
    if not os.path.lexists(os.path.join(model_dir, STATE_FILE)):
        return None, None
    try:
        named = _state_paths(model_dir)
    except ValueError as fault:
        return "", str(fault)
    # By name in model_dir, as tf.train.latest_checkpoint finds it in a moved model dir.
    return os.path.join(model_dir, os.path.basename(named)), None


def damage(prefix: str) -> str | None:
    """Why the checkpoint ``prefix`` cannot be restored, or None when every tensor reads."""
    if not os.path.exists(prefix + ".index"):
        return "missing"
    try:
        reader = tf.train.load_checkpoint(prefix)
        for name in reader.get_variable_to_shape_map():
            reader.get_tensor(name)
    except (tf.errors.OpError, ValueError, IndexError) as error:  # IndexError: a short file.
        return str(getattr(error, "message", error)).splitlines()[0][:160]
    return None


def inspect(model_dir: str) -> Resume:
    """The ``Resume`` of ``model_dir``; reads only.

    Raises:
      UsageError: checkpoint files or a state file, and no intact checkpoint among them.
    """
    if not os.path.isdir(model_dir):
        return Resume()
    named, fault = _named(model_dir)
    disk = _on_disk(model_dir)
    if named and _PREFIX.match(os.path.basename(named) + ".index"):
        disk.setdefault(checkpoint_step.step_of(named), named)
    stale: list[tuple[str, str]] = []
    for step in sorted(disk, reverse=True):
        why = damage(disk[step])
        if why is None:
            return Resume(disk[step], step, tuple(stale), named, fault)
        stale.append((disk[step], why))
    if named is None and not stale:
        return Resume()
    state = (f"the {STATE_FILE} state file {fault}" if fault else
             f"the {STATE_FILE} file names {named} and no checkpoint is there")
    described = "; ".join([f"{os.path.basename(p)}: {why}" for p, why in stale]
                          + ([state] if fault or not stale else []))
    raise UsageError(
        f"model_dir must hold an intact checkpoint to resume (nothing was changed; use a new "
        f"--model-dir to start over). Received: model_dir={model_dir!r} ({described})")


def describe(resume: Resume, doing: str = "resuming from") -> str:
    """One sentence: what is damaged and which checkpoint the resume restores instead
    (``doing`` it)."""
    path, named = cast(str, resume.path), cast(str, resume.named)  # A resume that falls back.
    if resume.stale:
        names = ", ".join(f"{os.path.basename(p)} ({why})" for p, why in resume.stale)
        what = f"checkpoint {names} cannot be restored"
        if resume.state_fault:
            what += f", and the {STATE_FILE} state file {resume.state_fault}"
    elif resume.state_fault:
        state = os.path.join(os.path.dirname(path), STATE_FILE)
        what = f"the {STATE_FILE} state file {resume.state_fault} ({state})"
    else:
        what = f"the {STATE_FILE} state file names {os.path.basename(named)}, not the newest"
    return f"{what}; {doing} {os.path.basename(path)}, the newest intact checkpoint"


def fall_back(model_dir: str, resume: Resume, now: datetime.datetime | None = None) -> str:
    """Moves the damaged files and the old state file aside, untouched, and writes a state
    file naming ``resume.path``; returns the directory they went to."""
    stamp = (now or datetime.datetime.now(datetime.timezone.utc)).strftime("%Y%m%d-%H%M%S")
    aside = os.path.join(model_dir, f"damaged-{stamp}")
    os.makedirs(aside)
    moved = [p for prefix, _ in resume.stale for p in glob.glob(glob.escape(prefix) + ".*")]
    state = os.path.join(model_dir, STATE_FILE)
    for path in moved + ([state] if os.path.exists(state) else []):
        os.rename(path, os.path.join(aside, os.path.basename(path)))
    intact = sorted((s, p) for s, p in _on_disk(model_dir).items() if s <= resume.step)
    # Names relative to the model dir, as Estimator writes them, so that it may move.
    tf.compat.v1.train.update_checkpoint_state(
        model_dir, os.path.basename(cast(str, resume.path)),  # A resume that falls back.
        all_model_checkpoint_paths=[os.path.basename(p) for _, p in intact])
    return aside
