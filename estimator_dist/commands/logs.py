"""Quiet TensorFlow's C++ and Python logging for the CLI; ``--verbose`` keeps it all.

``quiet_tensorflow`` must run before TensorFlow is imported: the C++ log level is read
from the environment once, at import. On TensorFlow 2.16+ the lines its libraries log
while they load and find their devices (oneDNN, "Could not find cuda drivers", a failed
``cuInit``) come before absl's logging is set up, where no level applies: ``quiet_import``
sends them to /dev/null. A command's modules import TensorFlow before its flags are
parsed, so each entry point (``estimator_dist/NAME.py``) calls ``quiet_unless_verbose``
on its command line before it imports its command.
"""
from __future__ import annotations

import logging
import os
import sys
import warnings
from typing import Any, Sequence

from estimator_dist.mends import import_hook, releases


def quiet_tensorflow(verbose: bool) -> None:
    """Silences TensorFlow's info and warning output unless ``verbose``."""
    if verbose:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=UserWarning, module="tensorflow|keras")
    warnings.filterwarnings("ignore", message=".*is deprecated.*", category=UserWarning)
    for name in ("tensorflow", "absl", "h5py"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def quiet_unless_verbose(argv: Sequence[str]) -> None:
    """Unless ``argv`` holds ``--verbose``: TensorFlow's C++ INFO lines (oneDNN,
    cpu_feature_guard) off, a level the user set kept, and its import's own lines on 2.16+
    sent to /dev/null (``quiet_import``). Runs before TensorFlow is imported."""
    if "--verbose" in argv:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    quiet_import()


def tensorflow_python_logging(verbose: bool) -> None:
    """Sets TF's Python logger after import (its v1 logging resets the level).

    Verbose shows TensorFlow's and Estimator's INFO logs; otherwise even errors are
    silenced: the CLI reports every failure itself, in one line.
    """
    import tensorflow as tf  # Late: loads TensorFlow.

    level = logging.INFO if verbose else logging.CRITICAL
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO if verbose
                                       else tf.compat.v1.logging.FATAL)
    tf.get_logger().setLevel(level)


class _QuietImport(import_hook.AfterImport):
    """Imports ``tensorflow`` with file descriptor 2 on /dev/null, then steps aside."""

    def __init__(self) -> None:
        super().__init__("tensorflow", None)

    def exec_module(self, module: Any) -> None:
        sys.stderr.flush()
        saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(null, 2)
            self._loader.exec_module(module)
            module.config.list_physical_devices()  # Finds the devices: cuInit logs here.
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            os.close(null)


def quiet_import() -> None:
    """Silences what TensorFlow 2.16+ logs while it is imported (C++ lines no log level
    reaches), from the moment it is imported; nothing on 2.15, or once it is imported."""
    release = releases.tensorflow_release()
    if ("tensorflow" in sys.modules or release is None or release in releases.LEGACY
            or any(isinstance(f, _QuietImport) for f in sys.meta_path)):
        return
    sys.meta_path.insert(0, _QuietImport())
