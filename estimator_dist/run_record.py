"""The run recorded in a model dir: ``run.json``, the resolved settings of the train run.

``python -m estimator_dist.train`` writes it once its settings are checked and before the
first step, so a resume, ``report`` and ``migrate`` need no repeated flags. A resume may
change how the run trains (steps, strategy, replicas, batch size, checkpoints) but not
what it trains: a different model or model params is refused, naming the difference.

The settings are a dataclass (``job.settings.RunSettings``) whose every field says in its
metadata (under ``ROLE``) how the record keeps it, one of ``ROLES``; nothing here names a
setting.

Imports no TensorFlow: the CLI reads a local record before TensorFlow is imported; a model
dir with a scheme (``gs://``) is read and written through TensorFlow's file systems
(``remote_files``).
"""
from __future__ import annotations

import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
from typing import Any, Iterator, Mapping

from estimator_dist import remote_files
from estimator_dist.errors import UsageError

FILENAME = "run.json"
# The key of a settings field's metadata that holds its role, and the roles:
ROLE = "run_record"
# Defines the model in the checkpoint: a resume must keep it (and takes it from the record).
IDENTITY = "identity"
# Describes the run: a resume takes it from the record when not given again.
CARRIED = "carried"
# Where the run executes (strategy, replicas, TPU): recorded, but each invocation says it.
LOCAL = "local"
# Belongs to one invocation, not to the run.
NOT_RECORDED = "not recorded"
ROLES = (IDENTITY, CARRIED, LOCAL, NOT_RECORDED)
_PACKAGES = ("estimator-dist", "tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
             "tensorflow-estimator", "tf-keras", "keras", "numpy")


def path(model_dir: str) -> str:
    return os.path.join(model_dir, FILENAME)


def _text(model_dir: str) -> str | None:
    """The record's text; None when there is none."""
    if remote_files.is_remote(model_dir):
        return remote_files.read(path(model_dir)).decode("utf-8")
    if not os.path.isdir(model_dir):
        return None
    with open(path(model_dir), encoding="utf-8") as file:
        return file.read()


def load(model_dir: str) -> dict[str, Any] | None:
    """The record in ``model_dir`` as a dict, or None when there is none. A remote model
    dir is checked first (``remote_files.check_reachable``)."""
    if remote_files.is_remote(model_dir):
        remote_files.check_reachable("model_dir", model_dir)
    try:
        text = _text(model_dir)
        if text is None:
            return None
        record = json.loads(text)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise UsageError(f"model_dir must hold a readable {FILENAME}. "
                         f"Received: {path(model_dir)!r} ({error})") from None
    if not isinstance(record, dict) or not isinstance(record.get("settings"), dict):
        raise UsageError(f"{FILENAME} must hold an object with 'settings'. "
                         f"Received: {path(model_dir)!r}")
    return record


def _names(schema: Any, *roles: str) -> list[str]:
    """The names of the fields of ``schema`` (the settings dataclass, or one of its
    instances) whose role is one of ``roles``."""
    return [field.name for field in dataclasses.fields(schema) if field.metadata[ROLE] in roles]


def carried_settings(record: Mapping[str, Any] | None, schema: type) -> dict[str, Any]:
    """The settings a resume takes from ``record`` (as ``load`` returns it; None: none), a
    mapping for ``settings.merge``; ``schema``: the settings dataclass."""
    if record is None:
        return {}
    carried = _names(schema, IDENTITY, CARRIED)
    return {k: v for k, v in record["settings"].items() if k in carried}


def recorded_settings(model_dir: str | None) -> dict[str, Any]:
    """The settings recorded in ``model_dir`` (a mapping), or {} without a record."""
    record = load(model_dir) if model_dir else None
    return {} if record is None else record["settings"]


def _differences(recorded: Mapping[str, Any], settings: Any) -> Iterator[tuple[str, Any, Any]]:
    for key in _names(settings, IDENTITY):
        before, after = recorded.get(key), getattr(settings, key)
        if isinstance(before, dict) and isinstance(after, dict):  # Model params, by name.
            for name in sorted(set(before) | set(after)):
                if before.get(name) != after.get(name):
                    yield f"{key}.{name}", before.get(name), after.get(name)
        elif before != after:
            yield key, before, after


def check_resume(model_dir: str, settings: Any, record: Mapping[str, Any] | None) -> None:
    """Refuses to train ``settings`` (the settings dataclass) into a model dir holding
    another model.

    ``record`` is the model dir's record as ``load`` returned it.

    Raises:
      UsageError: the record names another model or params (the first difference is
        named), or the model dir holds a checkpoint but no record.
    """
    if record is None:
        state = os.path.join(model_dir, "checkpoint")
        if remote_files.exists(state) if remote_files.is_remote(model_dir) else \
                os.path.exists(state):
            raise UsageError(
                f"model_dir must be new or hold a run of estimator_dist.train ({FILENAME}); "
                "use a new --model-dir. Received: "
                f"model_dir={model_dir!r} with a checkpoint and no {FILENAME}")
        return
    for name, before, after in _differences(record["settings"], settings):
        raise UsageError(
            f"{name} must match the run recorded in {path(model_dir)} ({before!r}) to resume "
            f"it; use a new --model-dir for another model. Received: {name}={after!r}")


def versions() -> dict[str, str]:
    """Installed versions of the packages a run depends on, and Python's."""
    found = {"python": platform.python_version()}
    for package in _PACKAGES:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def make_record(settings: Any, data: Any) -> dict[str, Any]:
    """The record of a run: its resolved ``settings`` (the settings dataclass), ``data``
    spec and versions."""
    recorded = _names(settings, IDENTITY, CARRIED, LOCAL)
    kept = {k: v for k, v in dataclasses.asdict(settings).items() if k in recorded}
    return {"settings": kept, "data": data, "versions": versions(),
            "recorded_at": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds")}


def write(model_dir: str, record: Mapping[str, Any]) -> None:
    """Writes ``record`` to ``model_dir`` atomically (a reader never sees half a file)."""
    if remote_files.is_remote(model_dir):
        remote_files.put(path(model_dir), json.dumps(record, indent=2, sort_keys=True) + "\n",
                         overwrite=True)
        return
    temporary = path(model_dir) + ".tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as file:
            json.dump(record, file, indent=2, sort_keys=True)
            file.write("\n")
        os.replace(temporary, path(model_dir))
    except OSError:
        if os.path.exists(temporary):  # A full disk: leave no half-written file behind.
            os.remove(temporary)
        raise
