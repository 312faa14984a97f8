"""Helpers for tests that run ``python -m estimator_dist.train`` in-process."""
import hashlib
import logging
import os

import pytest
import tensorflow as tf

from estimator_dist.commands import train


@pytest.fixture
def keep_tf_logging():
    """Puts back the TF log levels the CLI lowers, so other tests see the defaults."""
    loggers = [logging.getLogger(name) for name in ("tensorflow", "absl", "h5py")]
    levels = [logger.level for logger in loggers]
    verbosity = tf.compat.v1.logging.get_verbosity()
    yield
    for logger, level in zip(loggers, levels):
        logger.setLevel(level)
    tf.compat.v1.logging.set_verbosity(verbosity)


def run_main(argv, capsys):
    """Runs ``train.main(argv)``; returns (exit code, stdout, stderr)."""
    try:
        code = train.main([str(a) for a in argv])
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def snapshot(directory):
    """relative path -> (mtime, sha1) of every file under ``directory``."""
    found = {}
    for root, _, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as file:
                digest = hashlib.sha1(file.read()).hexdigest()
            found[os.path.relpath(path, directory)] = (os.stat(path).st_mtime_ns, digest)
    return found
