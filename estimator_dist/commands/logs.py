"""Quiet TensorFlow's C++ and Python logging for the CLI; ``--verbose`` keeps it all.

``quiet_tensorflow`` must run before TensorFlow is imported: the C++ log level is read
from the environment once, at import.
"""
import logging
import os
import warnings


def quiet_tensorflow(verbose):
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


def tensorflow_python_logging(verbose):
    """Sets TF's Python logger after import (its v1 logging resets the level).

    Verbose shows TensorFlow's and Estimator's INFO logs; otherwise even errors are
    silenced: the CLI reports every failure itself, in one line.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    level = logging.INFO if verbose else logging.CRITICAL
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.INFO if verbose
                                       else tf.compat.v1.logging.FATAL)
    tf.get_logger().setLevel(level)
