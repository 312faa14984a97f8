"""What the launcher says when it restarts a cluster: which task died, and where training
resumes.

Training resumes from the model dir's newest checkpoint, which TensorFlow names in the
text file ``MODEL_DIR/checkpoint`` (``model_checkpoint_path: "model.ckpt-120"``). The
launcher reads that file itself: it imports neither TensorFlow nor numpy (both start
threads, and the launcher unshares a user namespace, which the kernel refuses to a
process that runs threads). The model dir comes from the command's ``--model-dir`` flag;
without one (a config file, a bucket path) the line says "the last checkpoint".
"""
import os
import re
import signal

_MODEL_DIR_FLAG = "--model-dir"
_CHECKPOINT_PATH = re.compile(r'^model_checkpoint_path:\s*"(?P<path>.*)"\s*$', re.MULTILINE)
_STEP = re.compile(r"-(?P<step>\d+)$")


def model_dir_of(command):
    """The value of ``--model-dir DIR`` or ``--model-dir=DIR`` in ``command``, else None."""
    for i, arg in enumerate(command):
        if arg == _MODEL_DIR_FLAG and i + 1 < len(command):
            return command[i + 1]
        if arg.startswith(_MODEL_DIR_FLAG + "="):
            return arg.split("=", 1)[1]
    return None


def checkpoint_step(model_dir):
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


def describe_exit(code):
    """``exit code 3``, or ``exit code -9 (SIGKILL)`` for a process a signal ended."""
    if code < 0:
        try:
            return f"exit code {code} ({signal.Signals(-code).name})"
        except ValueError:
            pass
    return f"exit code {code}"


def restart_line(task_name, code, restart, max_restarts, model_dir):
    """The one line the launcher prints when it restarts the cluster."""
    step = checkpoint_step(model_dir)
    where = "the last checkpoint" if step is None else f"step {step}"
    return (f"launch: {task_name} failed with {describe_exit(code)}; restarting every task "
            f"({restart} of {max_restarts}), resuming from {where}")
