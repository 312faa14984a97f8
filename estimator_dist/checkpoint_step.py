"""The global step of a model dir's newest checkpoint, read without TensorFlow.

TensorFlow names the newest checkpoint in the text file ``MODEL_DIR/checkpoint``
(``model_checkpoint_path: "model.ckpt-120"``). The launcher reads it too, and the launcher
imports neither TensorFlow nor numpy (both start threads, and it unshares a user
namespace, which the kernel refuses to a process that runs threads), so the file is read
here as text: one reader for the launcher, the stop deadline and the train job.
"""
from __future__ import annotations

import os
import re

_CHECKPOINT_PATH = re.compile(r'^model_checkpoint_path:\s*"(?P<path>.*)"\s*$', re.MULTILINE)
_STEP = re.compile(r"-(?P<step>\d+)$")


def step_of(prefix: str | None) -> int:
    """The step in a checkpoint prefix (``.../model.ckpt-120`` -> 120); 0 for None."""
    if prefix is None:
        return 0
    found = _STEP.search(prefix)
    if not found:
        raise ValueError(f"checkpoint prefix must end in -STEP. Received: {prefix!r}")
    return int(found["step"])


def newest_step(model_dir: str | None) -> int | None:
    """The global step of ``model_dir``'s newest checkpoint; 0 when it has none yet; None
    when it cannot be read from here (no model dir, a bucket, a damaged file)."""
    if model_dir is None or "://" in model_dir:
        return None
    try:
        with open(os.path.join(model_dir, "checkpoint"), encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        return 0
    except (OSError, UnicodeDecodeError):
        return None
    found = _CHECKPOINT_PATH.search(text)
    step = found and _STEP.search(found["path"])
    return int(step["step"]) if step else None
